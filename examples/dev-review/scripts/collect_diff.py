"""Print the changes against HEAD, untracked files included, as one size-capped JSON object."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

# Stable, plain output whatever the user's git configuration says.
GIT = ["git", "-c", "core.quotepath=off", "-c", "color.ui=never"]
DIFF_FLAGS = ["--no-color", "--no-ext-diff", "--no-textconv"]


def git(*args: str, ok_codes: tuple[int, ...] = (0,)) -> bytes:
    """Run git in the current directory and return its stdout; raise on unexpected exit codes."""
    proc = subprocess.run([*GIT, *args], stdin=subprocess.DEVNULL, capture_output=True,
                          check=False)
    if proc.returncode not in ok_codes:
        message = proc.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"git {' '.join(args)} failed ({proc.returncode}): {message}")
    return proc.stdout


def base_revision() -> str:
    """HEAD, or the empty tree when the repository has no commit yet."""
    try:
        git("rev-parse", "--verify", "--quiet", "HEAD")
        return "HEAD"
    except RuntimeError:
        return git("hash-object", "-t", "tree", "--stdin").decode().strip()


def collect(max_bytes: int) -> str:
    """Tracked changes, then each untracked file as a new-file diff; stops once past the cap."""
    # --relative limits the diff to the current directory and shows paths relative to it.
    parts = [git("diff", *DIFF_FLAGS, "--relative", base_revision())]
    size = len(parts[0])
    untracked = git("ls-files", "--others", "--exclude-standard", "-z", "--", ".")
    for name in sorted(filter(None, untracked.decode("utf-8", "surrogateescape").split("\0"))):
        if size > max_bytes:
            break  # already truncated: reading more files would be wasted work
        if name.endswith("/"):
            continue  # a nested repository, listed as a directory
        # `--no-index` exits 1 when the files differ, which is always the case here.
        part = git("diff", *DIFF_FLAGS, "--no-index", "--", "/dev/null", name, ok_codes=(0, 1))
        parts.append(part)
        size += len(part)
    return b"".join(parts).decode("utf-8", "replace")


def cap(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut `text` to at most `max_bytes` UTF-8 bytes on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    # Dropping the incomplete trailing sequence keeps whole characters only.
    return data[:max_bytes].decode("utf-8", "ignore"), True


def non_negative(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return number


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-bytes", type=non_negative, required=True,
                        help="largest diff to return, in UTF-8 bytes")
    args = parser.parse_args()
    diff, truncated = "", False
    try:
        inside = git("rev-parse", "--is-inside-work-tree").strip() == b"true"
    except (OSError, RuntimeError) as exc:
        inside = False
        print(f"collect_diff: {exc}", file=sys.stderr)
    if not inside:
        print("collect_diff: the current directory is not inside a git work tree; "
              "returning an empty diff", file=sys.stderr)
    else:
        try:
            diff, truncated = cap(collect(args.max_bytes), args.max_bytes)
        except (OSError, RuntimeError) as exc:
            # An empty diff would look like "no change" to the reviewer: fail loudly instead.
            print(f"collect_diff: {exc}", file=sys.stderr)
            return 1
        if truncated:
            print(f"collect_diff: diff truncated to {args.max_bytes} bytes", file=sys.stderr)
    print(json.dumps({"diff": diff, "truncated": truncated}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
