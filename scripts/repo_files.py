"""The files of a checkout that the source checks read: tracked and untracked-but-not-ignored, as git lists them."""
import subprocess


def repo_files(root):
    """Sorted repository-relative paths of every file git tracks or would add (not ignored) under `root`."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    return sorted(set(git("ls-files") + git("ls-files", "--others", "--exclude-standard")))
