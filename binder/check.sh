#!/usr/bin/env bash
# make binder-check: does the Binder recipe alone run every tutorial?
#
# Like repo2docker: copy the repository as it would be committed (tracked files and new files that
# are not git-ignored), make a fresh Python 3.11 environment holding what repo2docker's base image
# has for running notebooks (ipykernel, nbclient), pip install -r binder/requirements.txt from the
# copy's root, run binder/postBuild if there is one, then execute every tutorial in a copy of
# notebooks/ with no API keys set. Fails on the first cell that raises. Leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/loom-binder.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "binder-check: copying the repository to $tmp/repo"
mkdir "$tmp/repo"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$tmp/repo"

echo "binder-check: a fresh venv (python3 = $(python3 --version))"
python3 -m venv "$tmp/venv"
py="$tmp/venv/bin/python"
pip() {  # quiet, without the notes some pip configurations print for every missing find-links folder
  "$py" -m pip install -q "$@" 2> >(grep -v "^WARNING: Location 'file:" >&2)
}
pip --upgrade pip
pip ipykernel nbclient  # what repo2docker's base image brings
(cd "$tmp/repo" && pip -r binder/requirements.txt)
if [ -x "$tmp/repo/binder/postBuild" ]; then
  (cd "$tmp/repo" && PATH="$tmp/venv/bin:$PATH" ./binder/postBuild)
fi
echo "binder-check: installed in $((SECONDS - start)) s"

cd "$tmp/repo/notebooks"
env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY JUPYTER_PLATFORM_DIRS=1 "$py" - <<'PY'
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

for path in sorted(Path(".").glob("[0-9]*.ipynb")):
    began = time.monotonic()
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    if errors:
        sys.exit(f"binder-check: {path} has an error output: {errors[0].ename}: {errors[0].evalue}")
    print(f"binder-check: {path} ran in {time.monotonic() - began:.1f} s")
PY
echo "binder-check: passed in $((SECONDS - start)) s"
