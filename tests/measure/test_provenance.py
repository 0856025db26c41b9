"""flashsim.measure.provenance.code_tree: a result names the commit its code came from, and says when the working
tree differs from that commit (a GPU machine's copy may carry older git metadata than its files)."""
import subprocess

from flashsim.measure import provenance


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def test_the_tree_names_the_commit_and_the_paths_changed_since(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert provenance.code_tree(str(tmp_path)) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    (tmp_path / "b.py").write_text("y = 1\n")
    assert provenance.code_tree(str(tmp_path)) == head + " + 2 paths changed or added since"


def test_outside_a_checkout_there_is_no_tree(tmp_path):
    assert provenance.code_tree(str(tmp_path)) is None


def test_a_folder_inside_another_checkout_is_not_taken_for_the_code(tmp_path):
    """An installed flashsim under some other repository (a venv inside it) names no tree."""
    _git(tmp_path, "init", "-q")
    site = tmp_path / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    assert provenance.code_tree(str(site)) is None
