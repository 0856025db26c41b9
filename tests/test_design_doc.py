"""docs/design.md's layout names every module and package of flashsim/, and every folder it names exists."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flashsim"
DESIGN = (ROOT / "docs" / "design.md").read_text()
LAYOUT = re.search(r"## The layout is the architecture\n+```\n(.*?)```", DESIGN, flags=re.S).group(1)
#: described as a pattern: the chapter folders (chNN/ and their own helpers), the answer keys, the recorded data
BY_PATTERN = re.compile(r"^course/ch\d\d/|^solutions/|^course/recorded/")


def _words() -> set:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", LAYOUT))


def test_every_module_and_package_is_in_the_layout():
    words = _words()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if BY_PATTERN.search(rel) or "__pycache__" in rel:
            continue
        if path.name == "__init__.py":
            if path.parent != PACKAGE and f"{path.parent.name}/" not in LAYOUT:
                missing.append(rel)
        elif path.stem not in words:
            missing.append(rel)
    assert not missing, f"docs/design.md's layout does not name: {missing}"


def test_every_folder_in_the_layout_exists():
    named = set(re.findall(r"(?<![/\w])([a-z_]+)/(?![\w/])", LAYOUT))      # folder entries, not paths into them
    dirs = {p.name for p in PACKAGE.rglob("*") if p.is_dir()} | {"flashsim"}
    assert named <= dirs, f"docs/design.md's layout names folders that are not in flashsim/: {sorted(named - dirs)}"
