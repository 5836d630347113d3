"""Create the local git repository that seed 002's pipeline clones (nothing is fetched).

The seed clones github.com/benjamintanweihao/kubeflow-mnist; this repository holds the same
three files, rewritten for numpy and scikit-learn (repo/ beside this script). Usage:

    python make_repo.py [DEST]      # DEST defaults to /var/tmp/kubeflow-mnist.git

It prints DEST, which the pipeline takes as `repo_url`. An existing DEST is replaced.

Why /var/tmp and not /tmp: a kfp 1.x step gets a /tmp of its own, as a pod does, so a
repository in the host's /tmp is not there for `git clone` (only the /tmp entry holding the
step's own folders, the home's, is shown). /var/tmp is a host folder every step sees, wherever
MILLPOND_HOME is. A DEST under /tmp works only inside the home's own /tmp entry.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "repo"
DEFAULT_DEST = Path("/var/tmp/kubeflow-mnist.git")  # visible to every step (a step's /tmp is its own)
FILES = ("constants.py", "preprocessing.py", "train.py")
# A commit needs an author; the user's git configuration may have none.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "millpond example", "GIT_AUTHOR_EMAIL": "example@localhost",
    "GIT_COMMITTER_NAME": "millpond example", "GIT_COMMITTER_EMAIL": "example@localhost",
}


def make_repo(dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in FILES:
        shutil.copy2(SOURCES / name, dest / name)
    env = {**os.environ, **GIT_ENV}
    steps = (["git", "init", "--quiet"], ["git", "add", *FILES], ["git", "commit", "--quiet", "-m", "kubeflow-mnist"])
    for argv in steps:
        subprocess.run(argv, cwd=dest, env=env, check=True)
    return dest


if __name__ == "__main__":
    print(make_repo(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DEST))
