/**
 * The `joblib` and `sklearn` plugins: they install joblib (and scikit-learn) on the workers and make
 * a Skyward backend joblib's default there, so `Parallel(n_jobs=-1)` inside a task — and everything
 * in scikit-learn that takes `n_jobs` — spreads its batches over every worker of the pool through
 * nested dispatch.
 */
import { fileURLToPath } from "node:url";
import { extendImage, Plugin, type PluginV1, parseInput } from "@skyward/core/contract";
import { z } from "zod";

/** Options of {@link joblib}. */
export interface JoblibOptions {
  /**
   * The joblib version: an exact version (`"1.5.2"`, installed as `joblib==1.5.2`) or a version
   * specifier (`">=1.3,<2"`). Default: any version — one the environment already has is used as it is.
   */
  version?: string;
}

/** Options of {@link sklearn}. */
export interface SklearnOptions {
  /**
   * The scikit-learn version: an exact version (`"1.7.2"`, installed as `scikit-learn==1.7.2`) or a
   * version specifier (`">=1.5"`). Default: any version — one the environment already has is used as
   * it is. joblib comes with it, at whatever version scikit-learn accepts.
   */
  version?: string;
}

/** The Python module holding the worker-side hooks and the backend. */
const WORKER_MODULE = "skyward_plugin_joblib";
const WORKER_PATH = fileURLToPath(new URL(`../python/${WORKER_MODULE}.py`, import.meta.url));

function describe(value: unknown): string {
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `${typeof value} ${String(value)}`;
}

/** An exact PEP 440 version (`1.5.2`, `1.6.0rc1`, `1.4.2.post1`). */
const EXACT_VERSION = /^\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?$/;
/** One clause of a PEP 440 specifier (`>=1.3`, `!=1.4.*`, `~=1.5`). */
const SPECIFIER_CLAUSE = /^(?:===?|~=|!=|<=|>=|<|>)\s*\d[A-Za-z0-9.*+!]*$/;

function isVersion(value: string): boolean {
  if (EXACT_VERSION.test(value)) return true;
  return value.split(",").every((clause) => SPECIFIER_CLAUSE.test(clause.trim()));
}

const versionSchema = z
  .string({ error: (issue) => `expected a version string, received ${describe(issue.input)}` })
  .refine(isVersion, {
    error: (issue) =>
      `expected an exact version like "1.5.2" or a specifier like ">=1.3,<2", received ${describe(issue.input)}`,
  });

const optionsSchema = z.strictObject(
  { version: versionSchema.optional() },
  { error: (issue) => `expected an options object, received ${describe(issue.input)}` },
);

/** The pip requirement for `name` at `version` (any version when none is given). */
function requirement(name: string, version: string | undefined): string {
  if (version === undefined) return name;
  return EXACT_VERSION.test(version) ? `${name}==${version}` : `${name}${version.replaceAll(" ", "")}`;
}

/** A plugin that adds `requirements` to the image and ships the joblib backend to the workers. */
function joblibPlugin(name: string, requirements: readonly string[]): PluginV1 {
  return Plugin.create(name)
    .withImageTransform(({ image }) => extendImage(image, { pip: requirements }))
    .withWorker({ module: WORKER_MODULE, path: WORKER_PATH });
}

/**
 * The `joblib` plugin. Adds `joblib` to every worker's pip requirements (pinned when `version` is
 * given) and, on each worker's first task, registers joblib's `"skyward"` backend and makes it the
 * default, so a `Parallel` call inside a task runs its batches across the whole pool: `n_jobs=-1`
 * means every task slot (nodes × concurrency). Each batch is pickled with cloudpickle and run as a
 * nested task on any worker; an exception raised there is re-raised in the task as the original
 * exception; `Parallel` calls made inside a batch run locally, as joblib nests.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { joblib } from "@skyward/plugin-joblib";
 *
 * const sweep = sky.python<[], number[]>("tasks:sweep");
 * await using pool = await sky.compute({ nodes: 4, options: { worker: { concurrency: 4 } }, plugins: [joblib()] });
 * await pool.run(sweep()); // `Parallel(n_jobs=-1)(delayed(f)(x) for x in xs)` in Python: 16 workers
 * ```
 *
 * @throws {ConfigurationError} (path `version`) when the version is neither an exact version nor a
 *   version specifier, or (path = the field) for an unknown option.
 */
export function joblib(options: JoblibOptions = {}): PluginV1 {
  const { version } = parseInput(optionsSchema, options);
  return joblibPlugin("joblib", [requirement("joblib", version)]);
}

/**
 * The `sklearn` plugin: the {@link joblib} plugin's backend, with `scikit-learn` (pinned when
 * `version` is given) and `joblib` added to every worker's pip requirements. scikit-learn
 * parallelises through joblib, so `GridSearchCV(n_jobs=-1)`, `cross_val_score(n_jobs=-1)` and every
 * other estimator taking `n_jobs` spread their fits over the pool from inside a task, with
 * `best_params_`, `cv_results_` and the rest as a local run gives them.
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { sklearn } from "@skyward/plugin-joblib";
 *
 * const gridSearch = sky.python<[], { best_params: Record<string, unknown> }>("tasks:grid_search");
 * await using pool = await sky.compute({ nodes: 4, plugins: [sklearn()] });
 * const best = await pool.run(gridSearch()); // GridSearchCV(SVC(), grid, n_jobs=-1).fit(X, y) in Python
 * ```
 *
 * @throws {ConfigurationError} (path `version`) when the version is neither an exact version nor a
 *   version specifier, or (path = the field) for an unknown option.
 */
export function sklearn(options: SklearnOptions = {}): PluginV1 {
  const { version } = parseInput(optionsSchema, options);
  return joblibPlugin("sklearn", [requirement("scikit-learn", version), "joblib"]);
}
