/**
 * End to end: joblib and scikit-learn inside tasks, with the real runtime, on pools of real worker
 * processes — 2 nodes on the Local provider, then 2 SSH hosts of the test bed. Each batch goes
 * through nested dispatch to whichever worker the client picks.
 *
 * The workers use Debian's Python (`/usr/bin/python3`) so its `python3-joblib` and `python3-sklearn`
 * are seen by the pool's virtual environment and nothing is downloaded.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as sky from "@skyward/core";
import { SSH } from "@skyward/provider-ssh";
import {
  createTestbed,
  requirePrerequisite,
  requireTestbed,
  type ScratchSkywardHome,
  type Testbed,
  testbedSshHosts,
  useScratchSkywardHome,
} from "@skyward/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { joblib, sklearn } from "../src/index.js";

const tasks = fileURLToPath(new URL("./fixtures/joblib_tasks.py", import.meta.url));
const SYSTEM_PYTHON = "/usr/bin/python3";

interface Spread {
  values: number[];
  local: number[];
  nodes: number[];
  pids: number[];
  task_pid: number;
  task_node: number;
  n_jobs: number;
  default_backend: string;
  joblib: string;
}

const spread = sky.python<[n: number], Spread>("joblib_tasks:spread");
const parallelFailure = sky.python<[n: number, bad: number], number[]>("joblib_tasks:parallel_failure");
const caughtFailure = sky.python<
  [n: number, bad: number],
  { type: string | null; message: string; cause: string; remote_traceback_names_fail_on: boolean }
>("joblib_tasks:caught_failure");
const nested = sky.python<[n: number], { backends: string[]; sums: number[]; pids: number[] }>(
  "joblib_tasks:nested",
);
const gridSearch = sky.python<
  [],
  {
    best_params: Record<string, unknown>;
    local_best_params: Record<string, unknown>;
    best_score: number;
    local_best_score: number;
    candidates: number;
  }
>("joblib_tasks:grid_search");
const crossValidationNodes = sky.python<
  [folds: number],
  { nodes: number[]; scores: number[]; local_scores: number[] }
>("joblib_tasks:cross_validation_nodes");

const abandonedBatches = sky.python<
  [directory: string],
  { started: number[]; cancelled: number[]; finished: number[] }
>("joblib_tasks:abandoned_batches");

const concurrency = sky.python<
  [nJobs: number, n: number, seconds: number],
  { items: number; most_at_once: number; nodes: number[]; n_jobs: number }
>("joblib_tasks:concurrency");

/** Why the Debian frameworks these tests run on are missing, or undefined when they are there. */
function missingSystemFrameworks(): string | undefined {
  const missing = [
    ["python3-joblib", "/usr/lib/python3/dist-packages/joblib"],
    ["python3-sklearn", "/usr/lib/python3/dist-packages/sklearn"],
  ].filter(([, path]) => !existsSync(path as string));
  if (missing.length === 0) return undefined;
  return `apt-get install -y ${missing.map(([name]) => name).join(" ")}`;
}

const frameworks = requirePrerequisite(
  missingSystemFrameworks(),
  "Debian's frameworks for the joblib end-to-end tests",
);

const squares = (n: number) => Array.from({ length: n }, (_, i) => i * i);

let home: ScratchSkywardHome | undefined;

beforeAll(async () => {
  // A private Skyward home: the pool's virtual environment is built here, not in ~/.skyward.
  home = await useScratchSkywardHome("skyward-joblib-e2e-");
});

afterAll(async () => {
  await home?.restore();
});

describe.skipIf(frameworks !== undefined)("joblib on a 2-node local pool, concurrency 2", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 2,
      image: { python: SYSTEM_PYTHON, includes: [tasks] },
      plugins: [joblib()],
      options: { console: false, worker: { concurrency: 2 } },
    });
  }, 240_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("Parallel(n_jobs=-1) in a task returns what a local run returns, its batches run on every node", async () => {
    const result = await pool.run(spread(100));
    expect(result.values).toEqual(squares(100));
    expect(result.values).toEqual(result.local);
    expect(result.n_jobs).toBe(4);
    expect(result.default_backend).toBe("SkywardBackend");
    expect(result.nodes).toEqual([0, 1]);
    // Each node is its own process: the batches did not run in the task's own process only.
    expect(result.pids.filter((pid) => pid !== result.task_pid).length).toBeGreaterThan(0);
  });

  it("Parallel(n_jobs=k) runs at most k items at once across the pool (4 slots)", async () => {
    for (const nJobs of [2, 3]) {
      const result = await pool.run(concurrency(nJobs, 12, 0.3));
      expect(result.items).toBe(12);
      expect(result.n_jobs).toBe(nJobs);
      expect(result.most_at_once).toBeLessThanOrEqual(nJobs);
      expect(result.most_at_once).toBe(nJobs); // the limit is used, not a single item at a time
    }
    // More jobs than slots: every slot (4), as n_jobs=-1.
    const above = await pool.run(concurrency(10, 16, 0.3));
    expect(above.n_jobs).toBe(4);
    expect(above.most_at_once).toBeLessThanOrEqual(4);
    const every = await pool.run(concurrency(-1, 16, 0.3));
    expect(every.n_jobs).toBe(4);
    expect(every.most_at_once).toBeLessThanOrEqual(4);
    expect(every.nodes).toEqual([0, 1]);
  });

  it("several tasks can use the whole pool at once", async () => {
    const results = await Promise.all([pool.run(spread(60)), pool.run(spread(60)), pool.run(spread(60))]);
    for (const result of results) expect(result.values).toEqual(squares(60));
  });

  it("an exception inside a batch reaches the task as the original exception", async () => {
    const caught = await pool.run(caughtFailure(100, 37));
    expect(caught).toEqual({
      type: "joblib_tasks.Unlucky",
      message: "item 37 is unlucky",
      cause: "RemoteTraceback",
      remote_traceback_names_fail_on: true,
    });
    const error = await pool.run(parallelFailure(100, 37)).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(sky.RemoteTaskError.isInstance(error)).toBe(true);
    const remote = error as sky.RemoteTaskError;
    expect(remote.exceptionType).toBe("joblib_tasks.Unlucky");
    expect(remote.exceptionMessage).toBe("item 37 is unlucky");
    // The pool is still usable afterwards.
    expect((await pool.run(spread(10))).values).toEqual(squares(10));
  });

  it("a failed batch stops the batches already sent, which then hold no slot of the pool", async () => {
    const directory = mkdtempSync(join(tmpdir(), "skyward-joblib-abort-"));
    try {
      // The task catches the failure and goes on: the batches sent (on its own node and the other)
      // are cancelled at once, not left to sleep their minute out.
      const result = await pool.run(abandonedBatches(directory));
      expect(result.started.length).toBeGreaterThanOrEqual(3);
      expect(result.cancelled).toEqual(result.started);
      expect(result.finished).toEqual([]);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("Parallel inside a batch runs locally, on that batch's worker", async () => {
    const result = await pool.run(nested(8));
    expect(result.backends).toEqual(["ThreadingBackend"]);
    expect(result.sums).toEqual(Array.from({ length: 8 }, (_, i) => (i * (i + 1)) / 2));
  });
});

describe.skipIf(frameworks !== undefined)("joblib with the process executor, on a 2-node local pool", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 2,
      image: { python: SYSTEM_PYTHON, includes: [tasks] },
      plugins: [joblib()],
      options: { console: false, worker: { concurrency: 2, executor: "process" } },
    });
  }, 240_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("registers the backend in each executor subprocess and spreads the batches over both nodes", async () => {
    const result = await pool.run(spread(100));
    expect(result.default_backend).toBe("SkywardBackend");
    expect(result.values).toEqual(squares(100));
    expect(result.n_jobs).toBe(4);
    expect(result.nodes).toEqual([0, 1]);
    expect((await pool.run(caughtFailure(100, 37))).type).toBe("joblib_tasks.Unlucky");
  });
});

describe.skipIf(frameworks !== undefined)(
  "the current joblib from PyPI (its submit API), on a 2-node local pool",
  () => {
    let pool: sky.Pool;

    beforeAll(async () => {
      pool = await sky.compute({
        nodes: 2,
        image: { python: SYSTEM_PYTHON, includes: [tasks] },
        plugins: [joblib({ version: ">=1.5" })],
        options: { console: false, worker: { concurrency: 2 } },
      });
    }, 240_000);

    afterAll(async () => {
      await pool?.close();
    });

    it("spreads Parallel(n_jobs=-1) over both nodes and re-raises a batch's exception as itself", async () => {
      const result = await pool.run(spread(100));
      expect(Number(result.joblib.split(".")[1])).toBeGreaterThanOrEqual(5);
      expect(result.values).toEqual(squares(100));
      expect(result.n_jobs).toBe(4);
      expect(result.nodes).toEqual([0, 1]);
      expect((await pool.run(caughtFailure(100, 37))).type).toBe("joblib_tasks.Unlucky");
      // The current API (submit) keeps to n_jobs too.
      const limited = await pool.run(concurrency(2, 10, 0.3));
      expect(limited.most_at_once).toBe(2);
    });
  },
);

describe.skipIf(frameworks !== undefined)("sklearn on a 2-node local pool, concurrency 2", () => {
  let pool: sky.Pool;

  beforeAll(async () => {
    pool = await sky.compute({
      nodes: 2,
      image: { python: SYSTEM_PYTHON, includes: [tasks] },
      plugins: [sklearn()],
      options: { console: false, worker: { concurrency: 2 } },
    });
  }, 240_000);

  afterAll(async () => {
    await pool?.close();
  });

  it("GridSearchCV(n_jobs=-1) gives the best_params_ of a local run", async () => {
    const result = await pool.run(gridSearch());
    expect(result.candidates).toBe(16);
    expect(result.best_params).toEqual(result.local_best_params);
    expect(result.best_score).toBeCloseTo(result.local_best_score, 12);
  });

  it("cross_validate(n_jobs=-1) fits its folds on every node, with a local run's scores", async () => {
    const result = await pool.run(crossValidationNodes(8));
    expect(result.nodes).toEqual([0, 1]);
    expect(result.scores).toEqual(result.local_scores);
  });
});

const testbedSkip = frameworks ?? (await requireTestbed());

describe.skipIf(testbedSkip !== undefined)("joblib and sklearn on 2 SSH hosts of the test bed", () => {
  let bed: Testbed;
  let pool: sky.Pool;

  beforeAll(async () => {
    bed = await createTestbed({ hosts: 2 });
    pool = await sky.compute({
      provider: SSH({ hosts: testbedSshHosts(bed) }),
      nodes: 2,
      ttl: 0,
      image: { python: SYSTEM_PYTHON, includes: [tasks] },
      plugins: [sklearn()],
      options: { console: false, worker: { concurrency: 2 }, bootstrapTimeout: 240 },
    });
  }, 300_000);

  afterAll(async () => {
    await pool?.close();
    await bed?.teardown();
  });

  it("Parallel(n_jobs=-1) spreads over both hosts and returns what a local run returns", async () => {
    const result = await pool.run(spread(100));
    expect(result.values).toEqual(squares(100));
    expect(result.n_jobs).toBe(4);
    expect(result.nodes).toEqual([0, 1]);
  });

  it("an exception comes back as itself, and GridSearchCV matches a local run", async () => {
    expect((await pool.run(caughtFailure(50, 3))).type).toBe("joblib_tasks.Unlucky");
    const search = await pool.run(gridSearch());
    expect(search.best_params).toEqual(search.local_best_params);
    const folds = await pool.run(crossValidationNodes(8));
    expect(folds.nodes).toEqual([0, 1]);
  });

  it("Parallel(n_jobs=k) runs at most k items at once over both hosts", async () => {
    // The hosts are network namespaces of this machine: one clock for every span.
    const limited = await pool.run(concurrency(3, 12, 0.3));
    expect(limited.items).toBe(12);
    expect(limited.most_at_once).toBe(3);
    const above = await pool.run(concurrency(8, 12, 0.3));
    expect(above.n_jobs).toBe(4);
    expect(above.most_at_once).toBeLessThanOrEqual(4);
  });
});
