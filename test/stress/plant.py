"""A private PostgreSQL installation with a copy of pg_tenure that carries a
planted bug, for showing that the stress test finds it.

build(name, root, pg_config, say) copies pg_tenure's sources into
root/build, applies test/stress/plants/<name>.patch, builds against the
installed server's headers, and installs the result with DESTDIR into
root/prefix, over copies of the server's bin, lib and share directories
(PostgreSQL finds its libdir and sharedir relative to its binaries, so the
copy runs as is).  Nothing outside root
is written.  It returns the private pg_config.

A plant applies exactly or not at all: with no fuzz, and only where the
lines each hunk replaces, with their context, occur exactly once in the
file.  A hunk may then sit at another line number than the one the patch
names (code was added or removed above it), since there is only one place
it can mean; anything else raises PlantError naming the plant and the
hunk: regenerate the plant (test/stress/README.md).

    python3 test/stress/plant.py [--build PG_CONFIG] [NAME ...]

checks that every plant (or each NAME) applies to this tree, and with
--build also builds each one against PG_CONFIG's server, in a temporary
directory; exit status 1 if one does not.

The plants:

  skip_commit_check  the fence is not checked again at COMMIT: a writer
                     paused after its last statement commits after a
                     newer epoch was issued (found by rule 4 of check.py)
  no_holdoff         a new tenure of a lease with the automatic hold-off is
                     active at once: two clients lead at the same time
                     (rule 2)
  volatile_epochs    epochs come from a clock that restarts with the server
                     and ignore the stored epoch: after a crash or restart
                     they go back and collide with earlier ones (rules 1,
                     3 and 4)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


class PlantError(OSError):
    """A plant that does not apply exactly to the tree."""


def plants():
    d = os.path.join(HERE, "plants")
    return sorted(f[:-len(".patch")] for f in os.listdir(d) if f.endswith(".patch"))


def run(args, cwd=None):
    r = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise OSError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}")
    return r.stdout


def hunks(text):
    """The hunks of a unified diff (as git diff writes it): (path, line,
    old) for each, path without its first component (patch -p1), line the
    first line number the hunk names, old the lines it replaces with their
    context."""
    found = []
    path = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@", lines[i])
        if lines[i].startswith("+++ "):
            path = lines[i][4:].split("\t")[0].split("/", 1)[-1]
        elif m:
            n_old = int(m.group(2) or 1)
            n_new = int(m.group(3) or 1)
            old = []
            while n_old or n_new:
                i += 1
                if i == len(lines):
                    raise PlantError(f"a hunk of {path} ends early")
                tag, body = lines[i][:1], lines[i][1:]
                if tag in (" ", ""):
                    old.append(body)
                    n_old, n_new = n_old - 1, n_new - 1
                elif tag == "-":
                    old.append(body)
                    n_old -= 1
                elif tag == "+":
                    n_new -= 1
            found.append((path, int(m.group(1)), old))
        i += 1
    return found


def check(name, tree):
    """Raise PlantError unless every hunk of plant name replaces lines that
    occur exactly once in their file of tree."""
    with open(os.path.join(HERE, "plants", f"{name}.patch")) as f:
        text = f.read()
    for n, (path, line, old) in enumerate(hunks(text), 1):
        where = f"planted bug {name}: hunk {n} ({path}, line {line})"
        target = os.path.join(tree, path)
        if not old or not os.path.exists(target):
            raise PlantError(f"{where}: no such file, or no lines to find it by;"
                             " regenerate the plant (test/stress/README.md)")
        with open(target) as f:
            have = f.read().split("\n")
        at = [i for i in range(len(have) - len(old) + 1) if have[i:i + len(old)] == old]
        if len(at) != 1:
            raise PlantError(f"{where}: the lines it changes occur {len(at)} times in"
                             f" {path}, not once; regenerate the plant (test/stress/README.md)")


def apply(name, tree):
    """Apply plant name to the sources in tree, exactly (see check())."""
    patch = os.path.join(HERE, "plants", f"{name}.patch")
    if not os.path.exists(patch):
        raise PlantError(f"no planted bug {name!r}; there are: {', '.join(plants())}")
    check(name, tree)
    try:
        run(["patch", "-p1", "-s", "--fuzz=0", "--batch", "--no-backup-if-mismatch",
             "--reject-file=-", "-i", patch], cwd=tree)
    except OSError as e:
        raise PlantError(f"planted bug {name} does not apply: {e}") from None


def build(name, root, pg_config, say):
    src = os.path.join(root, "build")
    os.mkdir(src)
    for f in os.listdir(TOP):
        if f == "Makefile" or f == "pg_tenure.control" or (f.startswith("pg_tenure--")
                                                          and f.endswith(".sql")):
            shutil.copy(os.path.join(TOP, f), src)
    shutil.copytree(os.path.join(TOP, "src"), os.path.join(src, "src"))
    apply(name, src)

    prefix = os.path.join(root, "prefix")
    dirs = {}
    for opt in ("--bindir", "--pkglibdir", "--sharedir"):
        dirs[opt] = run([pg_config, opt]).strip()
        shutil.copytree(dirs[opt], prefix + dirs[opt], symlinks=True)
    say(f"building pg_tenure with planted bug {name} into {prefix}")
    # built against the installed server's headers, installed into the copy
    make = ["make", "-s", f"PG_CONFIG={pg_config}", "with_llvm=no"]
    run(make + ["-j2"], cwd=src)
    run(make + ["install", f"DESTDIR={prefix}"], cwd=src)
    return prefix + os.path.join(dirs["--bindir"], "pg_config")


def main(argv):
    pg_config = None
    if argv[:1] == ["--build"] and len(argv) > 1:
        pg_config, argv = argv[1], argv[2:]
    failed = 0
    for name in argv or plants():
        with tempfile.TemporaryDirectory(prefix="pg_tenure-plant.") as root:
            try:
                if pg_config:
                    build(name, root, pg_config, lambda m: None)
                else:
                    shutil.copytree(os.path.join(TOP, "src"), os.path.join(root, "src"))
                    apply(name, root)
                print(f"{name}: {'builds' if pg_config else 'applies'}")
            except OSError as e:
                print(e, file=sys.stderr)
                failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
