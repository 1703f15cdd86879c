"""A private PostgreSQL installation with a copy of pg_tenure that carries a
planted bug, for showing that the stress test finds it.

build(name, root, pg_config, say) copies pg_tenure's sources into
root/build, applies test/stress/plants/<name>.patch, builds against the
installed server's headers, and installs the result with DESTDIR into
root/prefix, over copies of the server's bin, lib and share directories
(PostgreSQL finds its libdir and sharedir relative to its binaries, so the
copy runs as is).  Nothing outside root
is written.  It returns the private pg_config.

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
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def plants():
    d = os.path.join(HERE, "plants")
    return sorted(f[:-len(".patch")] for f in os.listdir(d) if f.endswith(".patch"))


def run(args, cwd=None):
    r = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise OSError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}")
    return r.stdout


def build(name, root, pg_config, say):
    patch = os.path.join(HERE, "plants", f"{name}.patch")
    if not os.path.exists(patch):
        raise OSError(f"no planted bug {name!r}; there are: {', '.join(plants())}")
    src = os.path.join(root, "build")
    os.mkdir(src)
    for f in os.listdir(TOP):
        if f == "Makefile" or f == "pg_tenure.control" or (f.startswith("pg_tenure--")
                                                          and f.endswith(".sql")):
            shutil.copy(os.path.join(TOP, f), src)
    shutil.copytree(os.path.join(TOP, "src"), os.path.join(src, "src"))
    run(["patch", "-p1", "-s", "-i", patch], cwd=src)

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
