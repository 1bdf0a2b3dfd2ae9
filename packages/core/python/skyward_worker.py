"""Entry script of the Skyward worker: `python skyward_worker.py --node 0 …`.

A script path (rather than `-m skyward.worker`) is what launchers such as `accelerate launch` take,
so the worker's LaunchCommand uses this file as its entrypoint. Running a script puts this
directory on sys.path, which is where the `skyward` package is.
"""

from skyward.worker import main

if __name__ == "__main__":
    main()
