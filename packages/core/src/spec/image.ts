/**
 * The image: a declarative description of the Python environment on every worker (interpreter,
 * pip and apt packages, environment variables, shipped code, telemetry), like the reference's
 * `sky.Image`. Users write an {@link ImageInput}; {@link image} validates it into a frozen
 * {@link Image} with every default filled in.
 *
 * The reference's `skyward_source` has no counterpart: the Python runtime always ships from the
 * installed `@skyward/core` package.
 */

import { createHash } from "node:crypto";
import { z } from "zod";
import { ConfigurationError } from "../errors/errors.js";
import { nonFiniteMessage, parseInput } from "../errors/validation.js";
import {
  Default as defaultMetrics,
  type MetricCollector,
  metricCollectorSchema,
} from "../observe/metrics.js";

/** A package index used only for the listed packages (e.g. PyTorch's CUDA wheels). */
export interface PipIndex {
  /** The index URL: `http://`, `https://` or `file://`. */
  readonly url: string;
  /** The packages (names, without version specifiers) that are installed from this index. */
  readonly packages: readonly string[];
  /**
   * When true, the dependencies of these packages that the index lacks come from the default index
   * (PyPI, or `PIP_INDEX_URL`): pip is given it as `--extra-index-url`, and then takes the newest
   * version of any package either index has. Needed for indexes that hold only their own projects
   * (NVIDIA's, whose wheels depend on numpy and scikit-learn). Default false: everything those
   * packages need must be on this index.
   */
  readonly dependenciesFromDefault?: boolean;
}

/** What users write for an image; every field is optional. */
export interface ImageInput {
  /**
   * The Python interpreter: `"auto"` (default; the host's `python3` if it is >= 3.10, else a
   * uv-managed 3.12), a version >= 3.10 (`"3.12"`, `"3.12.4"`), or an absolute interpreter path.
   */
  python?: string;
  /** Requirement specifiers installed with uv (`"torch>=2.1"`, `"numpy"`). */
  pip?: readonly string[];
  /** Scoped package indexes, each used only for its own packages. */
  pipIndexes?: readonly PipIndex[];
  /**
   * Debian packages installed with apt-get (`"ffmpeg"`, optionally `"name=version"` or `"name:arch"`).
   * The `Local` provider installs nothing on this machine: it checks that they are installed.
   */
  apt?: readonly string[];
  /**
   * Environment variables exported on the workers; on SSH and cloud nodes also for the bootstrap's
   * apt, Python and pip phases, so a proxy (`HTTPS_PROXY`) or `PIP_INDEX_URL` given here reaches pip.
   * Keys match `[A-Za-z_][A-Za-z0-9_]*`.
   */
  env?: Readonly<Record<string, string>>;
  /**
   * Variables whose values are shell snippets evaluated once at bootstrap, the result exported on
   * the workers (`{ GIT_SHA: "git -C /repo rev-parse HEAD" }`). Keys follow the `env` rule.
   */
  shellVars?: Readonly<Record<string, string>>;
  /**
   * Local directories or `.py` files (relative to the working directory, or absolute) shipped to the
   * workers. A directory is shipped whole but for version control, caches and virtual environments
   * (`.git`, `__pycache__`, `.venv`, `node_modules`, …) and symbolic links, which are not followed
   * (not shipped): everything else goes, a `.env` file with secrets in it too — leave such files out
   * with `excludes` (`[".env"]`) and give secrets as the spec's `secrets`.
   */
  includes?: readonly string[];
  /** Glob patterns left out of the `includes`. */
  excludes?: readonly string[];
  /** Telemetry collectors; default `metrics.Default()`; `null` disables telemetry. */
  metrics?: readonly MetricCollector[] | null;
  /** Seconds the bootstrap may take; a positive whole number, default 300. */
  bootstrapTimeout?: number;
}

/** A validated image: every field present, everything frozen. Made by {@link image}. */
export interface Image {
  /** `"auto"`, a Python version (`"3.12"`), or an absolute interpreter path. */
  readonly python: string;
  /** Requirement specifiers, in the order given. */
  readonly pip: readonly string[];
  /** Scoped package indexes. */
  readonly pipIndexes: readonly PipIndex[];
  /** Debian packages. */
  readonly apt: readonly string[];
  /** Environment variables exported on the workers. */
  readonly env: Readonly<Record<string, string>>;
  /** Shell snippets evaluated at bootstrap, exported as variables. */
  readonly shellVars: Readonly<Record<string, string>>;
  /** Local paths shipped to the workers. */
  readonly includes: readonly string[];
  /** Glob patterns left out of the includes. */
  readonly excludes: readonly string[];
  /** Telemetry collectors, or `null` when telemetry is disabled. */
  readonly metrics: readonly MetricCollector[] | null;
  /** Seconds the bootstrap may take. */
  readonly bootstrapTimeout: number;
}

/** The bootstrap timeout, in seconds, when none is given (the reference's default). */
const DEFAULT_BOOTSTRAP_TIMEOUT = 300;

/** The oldest Python the worker runtime supports. */
const MINIMUM_PYTHON: readonly [number, number] = [3, 10];

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** PEP 508 project names. */
const PACKAGE_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/;
/** Debian package names (policy §5.6.1), optionally with `:arch` and `=version` as apt-get accepts. */
const APT_PACKAGE = /^[a-z0-9][a-z0-9+.-]+(?::[a-z0-9][a-z0-9-]*)?(?:=[A-Za-z0-9.+~:-]+)?$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is rejected
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

function quoted(value: string): string {
  return JSON.stringify(value);
}

/** A non-empty, single-line string; `what` describes the expected value in messages. */
function lineSchema(what: string) {
  return z.string().superRefine((value, context) => {
    if (value.trim().length === 0) {
      context.addIssue({ code: "custom", message: `expected ${what}, received an empty string` });
    } else if (CONTROL_CHARACTERS.test(value)) {
      context.addIssue({
        code: "custom",
        message: `expected ${what} on one line, without control characters`,
      });
    }
  });
}

function isSupportedPythonVersion(value: string): boolean {
  const match = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(value);
  if (!match) return false;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  return major > MINIMUM_PYTHON[0] || (major === MINIMUM_PYTHON[0] && minor >= MINIMUM_PYTHON[1]);
}

const pythonSchema = z.string().superRefine((value, context) => {
  const valid =
    value === "auto" ||
    isSupportedPythonVersion(value) ||
    (value.startsWith("/") && !CONTROL_CHARACTERS.test(value));
  if (!valid) {
    context.addIssue({
      code: "custom",
      message: `expected "auto", a Python version >= ${MINIMUM_PYTHON.join(".")} like "3.12" or "3.12.4", or an absolute interpreter path, received ${quoted(value)}`,
    });
  }
});

const requirementSchema = lineSchema('a requirement specifier like "torch>=2.1"').superRefine(
  (value, context) => {
    if (value.trim().length === 0 || CONTROL_CHARACTERS.test(value)) return;
    if (value.startsWith("-")) {
      context.addIssue({
        code: "custom",
        message: `expected a requirement specifier, received the option ${quoted(value)}; pip options are not accepted (use pipIndexes for custom indexes)`,
      });
    } else if (!/^[A-Za-z0-9./]/.test(value)) {
      context.addIssue({
        code: "custom",
        message: `expected a requirement specifier like "torch>=2.1", received ${quoted(value)}`,
      });
    }
  },
);

const packageNameSchema = z.string().superRefine((value, context) => {
  if (!PACKAGE_NAME.test(value)) {
    context.addIssue({
      code: "custom",
      message: `expected a package name like "torch" (letters, digits, ".", "_", "-"; no version), received ${quoted(value)}`,
    });
  }
});

function isIndexUrl(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  if (url.protocol === "file:") return url.pathname.length > 1;
  return (url.protocol === "http:" || url.protocol === "https:") && url.hostname.length > 0;
}

const pipIndexSchema = z
  .strictObject({
    url: z.string().superRefine((value, context) => {
      if (!isIndexUrl(value)) {
        context.addIssue({
          code: "custom",
          message: `expected an http://, https:// or file:// URL, received ${quoted(value)}`,
        });
      }
    }),
    packages: z.array(packageNameSchema).min(1, { message: "expected at least one package name" }),
    dependenciesFromDefault: z.boolean().optional(),
  })
  .transform(
    (index): PipIndex =>
      Object.freeze({
        url: index.url,
        packages: Object.freeze([...index.packages]),
        ...(index.dependenciesFromDefault ? { dependenciesFromDefault: true } : {}),
      }),
  );

const aptPackageSchema = z.string().superRefine((value, context) => {
  if (!APT_PACKAGE.test(value)) {
    context.addIssue({
      code: "custom",
      message: `expected a Debian package name like "ffmpeg" (lowercase letters, digits, "+", "-", "."; optionally "=version"), received ${quoted(value)}`,
    });
  }
});

/** A record whose keys are environment variable names. `valueSchema` checks each value. */
function variablesSchema(valueSchema: z.ZodType<string, string>) {
  return z.record(z.string(), valueSchema).superRefine(
    (record, context) => {
      for (const key of Object.keys(record)) {
        if (!ENV_NAME.test(key)) {
          context.addIssue({
            code: "custom",
            path: [key],
            message: `expected a variable name matching [A-Za-z_][A-Za-z0-9_]*, received ${quoted(key)}`,
          });
        }
      }
    },
    // Check the keys even when a value is bad, so one pass reports every problem.
    { when: (payload) => isPlainObject(payload.value) },
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const bootstrapTimeoutSchema = z
  .number({ error: nonFiniteMessage("a positive whole number of seconds") })
  .superRefine((value, context) => {
    if (!(Number.isInteger(value) && value > 0)) {
      context.addIssue({
        code: "custom",
        message: `expected a positive whole number of seconds, received ${value}`,
      });
    }
  });

/** The image fields as written, without defaults: what `image()` and `extendImage()` accept. */
const imageFieldsSchema = z.strictObject({
  python: pythonSchema.optional(),
  pip: z.array(requirementSchema).optional(),
  pipIndexes: z.array(pipIndexSchema).optional(),
  apt: z.array(aptPackageSchema).optional(),
  env: variablesSchema(z.string()).optional(),
  shellVars: variablesSchema(lineSchema("a shell snippet")).optional(),
  includes: z.array(lineSchema("a local path")).optional(),
  excludes: z.array(lineSchema("a glob pattern")).optional(),
  metrics: z.array(metricCollectorSchema).nullable().optional(),
  bootstrapTimeout: bootstrapTimeoutSchema.optional(),
});

type ImageFields = z.output<typeof imageFieldsSchema>;

function frozenRecord(
  record: Readonly<Record<string, string>> | undefined,
): Readonly<Record<string, string>> {
  return Object.freeze(Object.fromEntries(Object.entries(record ?? {})));
}

function resolveImage(fields: ImageFields): Image {
  return Object.freeze({
    python: fields.python ?? "auto",
    pip: Object.freeze([...(fields.pip ?? [])]),
    pipIndexes: Object.freeze([...(fields.pipIndexes ?? [])]),
    apt: Object.freeze([...(fields.apt ?? [])]),
    env: frozenRecord(fields.env),
    shellVars: frozenRecord(fields.shellVars),
    includes: Object.freeze([...(fields.includes ?? [])]),
    excludes: Object.freeze([...(fields.excludes ?? [])]),
    metrics:
      fields.metrics === null
        ? null
        : fields.metrics === undefined
          ? defaultMetrics()
          : Object.freeze([...fields.metrics]),
    bootstrapTimeout: fields.bootstrapTimeout ?? DEFAULT_BOOTSTRAP_TIMEOUT,
  });
}

/**
 * Turns an {@link ImageInput} into a frozen {@link Image}, filling in the defaults. Strict: unknown
 * keys are errors. For composing into larger schemas (pool specs, TOML pools).
 */
export const imageSchema: z.ZodType<Image, ImageInput> = imageFieldsSchema.transform(resolveImage);

/**
 * Validates an image and returns it frozen, defaults filled in.
 * @throws {ConfigurationError} naming each bad field (`image.pip[2]`, `image.env["1BAD"]`).
 */
export function image(input: ImageInput = {}): Image {
  return parseInput(imageSchema, input, "image");
}

/**
 * A scoped package index: the listed packages are installed from `url`, everything else from PyPI.
 * @throws {ConfigurationError} on a bad URL or package name (`pipIndex.url`, `pipIndex.packages[0]`).
 */
export function pipIndex(input: {
  url: string;
  packages: readonly string[];
  dependenciesFromDefault?: boolean;
}): PipIndex {
  return parseInput(pipIndexSchema, input, "pipIndex");
}

/** The image used when a spec gives none: `"auto"` Python, no packages, the default metrics. */
export const DEFAULT_IMAGE: Image = image();

function appendNew<T>(
  existing: readonly T[],
  additions: readonly T[] | undefined,
  key: (item: T) => string,
): T[] {
  const seen = new Set(existing.map(key));
  const out = [...existing];
  for (const item of additions ?? []) {
    const itemKey = key(item);
    if (!seen.has(itemKey)) {
      seen.add(itemKey);
      out.push(item);
    }
  }
  return out;
}

const identity = (value: string): string => value;
const pipIndexKey = (index: PipIndex): string =>
  JSON.stringify([index.url, index.packages, index.dependenciesFromDefault === true]);

/**
 * Returns `image` with `additions` applied — what plugins use in their image transforms. List fields
 * (`pip`, `apt`, `pipIndexes`, `includes`, `excludes`) are appended, skipping entries already present;
 * `env` and `shellVars` are merged, the additions winning; `python` and `bootstrapTimeout` are
 * replaced when given. `metrics` are appended, unless the image has telemetry disabled (`null`), which
 * stays disabled; `metrics: null` in the additions disables it.
 * @throws {ConfigurationError} when the additions are invalid (paths relative to the additions, `image.pip[0]`).
 */
export function extendImage(base: Image, additions: ImageInput): Image {
  const extra = parseInput(imageFieldsSchema, additions, "image");
  const merged: ImageInput = {
    python: extra.python ?? base.python,
    pip: appendNew(base.pip, extra.pip, identity),
    pipIndexes: appendNew(base.pipIndexes, extra.pipIndexes, pipIndexKey),
    apt: appendNew(base.apt, extra.apt, identity),
    env: { ...base.env, ...extra.env },
    shellVars: { ...base.shellVars, ...extra.shellVars },
    includes: appendNew(base.includes, extra.includes, identity),
    excludes: appendNew(base.excludes, extra.excludes, identity),
    metrics:
      extra.metrics === null || base.metrics === null ? null : [...base.metrics, ...(extra.metrics ?? [])],
    bootstrapTimeout: extra.bootstrapTimeout ?? base.bootstrapTimeout,
  };
  // Re-validated so a hand-built `base` cannot slip an invalid value through.
  return parseInput(imageSchema, merged, "image");
}

function uniqueSorted(values: readonly string[]): string[] {
  return [...new Set(values)].sort();
}

function sortedEntries(record: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * The part of an image that determines the remote environment, in a canonical form: records as
 * key-sorted entries, and lists as sorted sets — installing `["a", "b"]` or `["b", "a", "a"]` gives
 * the same environment, so they hash alike. `metrics` and `bootstrapTimeout` do not change what is
 * installed and are left out.
 */
function environmentMaterial(image: Image): string {
  return JSON.stringify({
    apt: uniqueSorted(image.apt),
    env: sortedEntries(image.env),
    excludes: uniqueSorted(image.excludes),
    includes: uniqueSorted(image.includes),
    pip: uniqueSorted(image.pip),
    pipIndexes: uniqueSorted(
      image.pipIndexes.map((index) =>
        JSON.stringify([
          index.url,
          uniqueSorted(index.packages),
          ...(index.dependenciesFromDefault ? ["dependenciesFromDefault"] : []),
        ]),
      ),
    ),
    python: image.python,
    shellVars: sortedEntries(image.shellVars),
  });
}

function shortDigest(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex").slice(0, 12);
}

/**
 * A 12-hex-character fingerprint of the remote environment an image describes: Python, packages,
 * indexes, variables, includes and excludes (their paths, not their contents) — but not the Skyward
 * version, so it is stable across local code edits and Skyward upgrades. Order-insensitive for
 * `env`/`shellVars` keys and for every list (duplicates ignored); independent of `metrics` and
 * `bootstrapTimeout`.
 */
export function envHash(image: Image): string {
  return shortDigest(`skyward.image.env/1\n${environmentMaterial(image)}`);
}

/**
 * Like {@link envHash}, plus the Skyward version whose runtime is installed on the workers: a 12-hex
 * fingerprint that tells whether a machine image or snapshot baked from this image can be reused.
 * @param skywardVersion the version of `@skyward/core` (the caller passes its own).
 * @throws {ConfigurationError} when `skywardVersion` is empty.
 */
export function contentHash(image: Image, skywardVersion: string): string {
  if (typeof skywardVersion !== "string" || skywardVersion.trim().length === 0) {
    throw new ConfigurationError({
      issues: [{ path: "skywardVersion", message: "expected a non-empty version string" }],
    });
  }
  return shortDigest(`skyward.image.content/1\n${skywardVersion}\n${environmentMaterial(image)}`);
}

/** The default package index when `PIP_INDEX_URL` names none. */
export const DEFAULT_PIP_INDEX = "https://pypi.org/simple";

/** A requirement's project name, normalized (PEP 503), to match it against a scoped index's packages. */
export function projectName(requirement: string): string {
  const name = requirement.trim().split(/[\s<>=!~;[@(]/)[0] ?? requirement;
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

/** One `pip install` of an image's packages: from the default index, or from one scoped index. */
export interface PipInstallStep {
  /** The requirement specifiers, as the image gives them. */
  readonly requirements: readonly string[];
  /** The scoped index, or undefined for the default one. */
  readonly index?: {
    readonly url: string;
    /** The host pip must trust: set for an index over plain HTTP, which the user chose (a mirror). */
    readonly trustedHost?: string;
    /** Add the default index as `--extra-index-url` (see {@link PipIndex.dependenciesFromDefault}). */
    readonly dependenciesFromDefault: boolean;
  };
}

/**
 * How an image's `pip` packages are installed, in order: those no scoped index claims from the
 * default index, then each scoped index's own (a package named by several indexes comes from the
 * first). Shared by the SSH bootstrap script and the `Local` provider.
 */
export function pipInstallSteps(image: Pick<Image, "pip" | "pipIndexes">): PipInstallStep[] {
  const scoped = new Set(image.pipIndexes.flatMap((index) => index.packages.map(projectName)));
  const steps: PipInstallStep[] = [];
  const general = image.pip.filter((requirement) => !scoped.has(projectName(requirement)));
  if (general.length > 0) steps.push({ requirements: general });
  const claimed = new Set<string>();
  for (const index of image.pipIndexes) {
    const names = new Set(index.packages.map(projectName));
    const requirements = image.pip.filter((requirement) => {
      const name = projectName(requirement);
      return names.has(name) && !claimed.has(name);
    });
    for (const requirement of requirements) claimed.add(projectName(requirement));
    if (requirements.length === 0) continue;
    const url = new URL(index.url);
    steps.push({
      requirements,
      index: {
        url: index.url,
        ...(url.protocol === "http:" ? { trustedHost: url.hostname } : {}),
        dependenciesFromDefault: index.dependenciesFromDefault === true,
      },
    });
  }
  return steps;
}
