import { describe, expect, it } from "vitest";
import { ConfigurationError, type ConfigurationIssue } from "../errors/errors.js";
import { metrics } from "../observe/metrics.js";
import {
  contentHash,
  DEFAULT_IMAGE,
  envHash,
  extendImage,
  type ImageInput,
  image,
  imageSchema,
  pipIndex,
} from "./image.js";

function issuesOf(action: () => unknown): readonly ConfigurationIssue[] {
  try {
    action();
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return error.issues;
    throw error;
  }
  throw new Error("expected a ConfigurationError, nothing was thrown");
}

/** Feeds deliberately ill-typed input, as TOML or plain JavaScript could. */
function loose(input: Record<string, unknown>): ImageInput {
  return input as ImageInput;
}

describe("image defaults", () => {
  it("fills in the reference's defaults", () => {
    const resolved = image();
    expect(resolved).toEqual({
      python: "auto",
      pip: [],
      pipIndexes: [],
      apt: [],
      env: {},
      shellVars: {},
      includes: [],
      excludes: [],
      metrics: metrics.Default(),
      bootstrapTimeout: 300,
    });
    expect(DEFAULT_IMAGE).toEqual(resolved);
  });

  it("is frozen all the way down", () => {
    const resolved = image({
      pip: ["torch"],
      env: { A: "1" },
      pipIndexes: [{ url: "https://download.pytorch.org/whl/cu121", packages: ["torch"] }],
    });
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.pip)).toBe(true);
    expect(Object.isFrozen(resolved.env)).toBe(true);
    expect(Object.isFrozen(resolved.pipIndexes[0])).toBe(true);
    expect(Object.isFrozen(resolved.pipIndexes[0]?.packages)).toBe(true);
    expect(Object.isFrozen(resolved.metrics)).toBe(true);
  });

  it("does not share arrays with the input", () => {
    const pip = ["numpy"];
    const resolved = image({ pip });
    pip.push("scipy");
    expect(resolved.pip).toEqual(["numpy"]);
  });

  it("keeps what was given, and null metrics disables telemetry", () => {
    const resolved = image({
      python: "3.12.4",
      pip: ["torch>=2.1", "numpy==1.26.*", "pkg[extra]; python_version >= '3.11'", "./wheels/a.whl"],
      apt: ["ffmpeg", "libgl1", "git=1:2.39.2-1", "libc6:amd64"],
      env: { HF_HOME: "/data/hf", _private: "x" },
      shellVars: { GIT_SHA: "git rev-parse HEAD" },
      includes: ["./src/mypkg", "tasks.py"],
      excludes: ["*.ipynb", "data/**"],
      metrics: null,
      bootstrapTimeout: 900,
    });
    expect(resolved.python).toBe("3.12.4");
    expect(resolved.pip).toHaveLength(4);
    expect(resolved.apt).toEqual(["ffmpeg", "libgl1", "git=1:2.39.2-1", "libc6:amd64"]);
    expect(resolved.env).toEqual({ HF_HOME: "/data/hf", _private: "x" });
    expect(resolved.metrics).toBeNull();
    expect(resolved.bootstrapTimeout).toBe(900);
  });

  it("accepts a version or an absolute interpreter path for python", () => {
    expect(image({ python: "3.10" }).python).toBe("3.10");
    expect(image({ python: "/opt/conda/bin/python" }).python).toBe("/opt/conda/bin/python");
  });

  it("imageSchema does the same as image()", () => {
    expect(imageSchema.parse({ pip: ["x"] })).toEqual(image({ pip: ["x"] }));
  });
});

describe("image validation", () => {
  it("rejects unknown keys", () => {
    expect(issuesOf(() => image(loose({ pipp: ["torch"] })))).toEqual([
      { path: "image.pipp", message: "unknown field" },
    ]);
  });

  it.each<[string, Record<string, unknown>, ConfigurationIssue]>([
    [
      "a python 2 version",
      { python: "2.7" },
      {
        path: "image.python",
        message:
          'expected "auto", a Python version >= 3.10 like "3.12" or "3.12.4", or an absolute interpreter path, received "2.7"',
      },
    ],
    [
      "a too-old python 3",
      { python: "3.9" },
      {
        path: "image.python",
        message:
          'expected "auto", a Python version >= 3.10 like "3.12" or "3.12.4", or an absolute interpreter path, received "3.9"',
      },
    ],
    [
      "a relative interpreter path",
      { python: "bin/python" },
      {
        path: "image.python",
        message:
          'expected "auto", a Python version >= 3.10 like "3.12" or "3.12.4", or an absolute interpreter path, received "bin/python"',
      },
    ],
    [
      "an empty requirement",
      { pip: ["numpy", "torch", ""] },
      {
        path: "image.pip[2]",
        message: 'expected a requirement specifier like "torch>=2.1", received an empty string',
      },
    ],
    [
      "a pip option",
      { pip: ["--index-url=https://x"] },
      {
        path: "image.pip[0]",
        message:
          'expected a requirement specifier, received the option "--index-url=https://x"; pip options are not accepted (use pipIndexes for custom indexes)',
      },
    ],
    [
      "a multi-line requirement",
      { pip: ["torch\nrm -rf /"] },
      {
        path: "image.pip[0]",
        message: 'expected a requirement specifier like "torch>=2.1" on one line, without control characters',
      },
    ],
    [
      "a non-string requirement",
      { pip: [42] },
      { path: "image.pip[0]", message: "expected string, received number 42" },
    ],
    [
      "an uppercase apt package",
      { apt: ["git", "FFmpeg"] },
      {
        path: "image.apt[1]",
        message:
          'expected a Debian package name like "ffmpeg" (lowercase letters, digits, "+", "-", "."; optionally "=version"), received "FFmpeg"',
      },
    ],
    [
      "an apt name with a shell metacharacter",
      { apt: ["git;reboot"] },
      {
        path: "image.apt[0]",
        message:
          'expected a Debian package name like "ffmpeg" (lowercase letters, digits, "+", "-", "."; optionally "=version"), received "git;reboot"',
      },
    ],
    [
      "an env name starting with a digit",
      { env: { "1BAD": "x" } },
      {
        path: 'image.env["1BAD"]',
        message: 'expected a variable name matching [A-Za-z_][A-Za-z0-9_]*, received "1BAD"',
      },
    ],
    [
      "an env name with a dash",
      { env: { "MY-VAR": "x" } },
      {
        path: "image.env.MY-VAR",
        message: 'expected a variable name matching [A-Za-z_][A-Za-z0-9_]*, received "MY-VAR"',
      },
    ],
    [
      "a non-string env value",
      { env: { PORT: 8080 } },
      { path: "image.env.PORT", message: "expected string, received number 8080" },
    ],
    [
      "a bad shellVars name",
      { shellVars: { "2X": "hostname" } },
      {
        path: 'image.shellVars["2X"]',
        message: 'expected a variable name matching [A-Za-z_][A-Za-z0-9_]*, received "2X"',
      },
    ],
    [
      "an empty shellVars snippet",
      { shellVars: { HOST: " " } },
      { path: "image.shellVars.HOST", message: "expected a shell snippet, received an empty string" },
    ],
    [
      "an empty include",
      { includes: ["./src", ""] },
      { path: "image.includes[1]", message: "expected a local path, received an empty string" },
    ],
    [
      "an empty exclude",
      { excludes: [""] },
      { path: "image.excludes[0]", message: "expected a glob pattern, received an empty string" },
    ],
    [
      "a fractional bootstrap timeout",
      { bootstrapTimeout: 1.5 },
      {
        path: "image.bootstrapTimeout",
        message: "expected a positive whole number of seconds, received 1.5",
      },
    ],
    [
      "a zero bootstrap timeout",
      { bootstrapTimeout: 0 },
      { path: "image.bootstrapTimeout", message: "expected a positive whole number of seconds, received 0" },
    ],
    [
      "an infinite bootstrap timeout",
      { bootstrapTimeout: Number.POSITIVE_INFINITY },
      {
        path: "image.bootstrapTimeout",
        message: "expected a positive whole number of seconds, received Infinity",
      },
    ],
    [
      "a string bootstrap timeout",
      { bootstrapTimeout: "300" },
      { path: "image.bootstrapTimeout", message: 'expected number, received the string "300"' },
    ],
    [
      "metrics that are not a list",
      { metrics: "default" },
      { path: "image.metrics", message: 'expected array, received the string "default"' },
    ],
    [
      "a metric with a bad interval",
      { metrics: [{ kind: "metric", collector: "cpu", name: "cpu", interval: -1 }] },
      { path: "image.metrics[0].interval", message: "expected a positive number of seconds, received -1" },
    ],
    [
      "a metric sampled in a busy loop",
      { metrics: [{ kind: "metric", collector: "custom", name: "q", command: "echo 1", interval: 0.01 }] },
      {
        path: "image.metrics[0].interval",
        message: "expected at least 0.1 seconds between samples, received 0.01",
      },
    ],
    [
      "a pip index with a bad URL",
      { pipIndexes: [{ url: "ftp://mirror", packages: ["torch"] }] },
      {
        path: "image.pipIndexes[0].url",
        message: 'expected an http://, https:// or file:// URL, received "ftp://mirror"',
      },
    ],
    [
      "a pip index listing a specifier instead of a name",
      { pipIndexes: [{ url: "https://x.org/simple", packages: ["torch>=2"] }] },
      {
        path: "image.pipIndexes[0].packages[0]",
        message:
          'expected a package name like "torch" (letters, digits, ".", "_", "-"; no version), received "torch>=2"',
      },
    ],
    [
      "a pip index's dependenciesFromDefault that is not a boolean",
      { pipIndexes: [{ url: "https://x.org/simple", packages: ["torch"], dependenciesFromDefault: "yes" }] },
      {
        path: "image.pipIndexes[0].dependenciesFromDefault",
        message: 'expected boolean, received the string "yes"',
      },
    ],
  ])("rejects %s", (_label, input, issue) => {
    expect(issuesOf(() => image(loose(input)))).toEqual([issue]);
  });

  it("reports every problem at once, a bad env key next to a bad env value", () => {
    const issues = issuesOf(() => image(loose({ env: { "1BAD": "x", PORT: 1 }, pip: [""] })));
    expect(issues.map((issue) => issue.path).sort()).toEqual([
      "image.env.PORT",
      'image.env["1BAD"]',
      "image.pip[0]",
    ]);
  });

  it("rejects a non-object image", () => {
    expect(issuesOf(() => image("torch" as unknown as ImageInput))).toEqual([
      { path: "image", message: 'expected object, received the string "torch"' },
    ]);
  });

  it("says so in the error message", () => {
    expect(() => image({ bootstrapTimeout: -5 })).toThrow(
      /image\.bootstrapTimeout: expected a positive whole number/,
    );
  });
});

describe("pipIndex", () => {
  it("returns a frozen index", () => {
    const index = pipIndex({
      url: "https://download.pytorch.org/whl/cu121",
      packages: ["torch", "torchvision"],
    });
    expect(index).toEqual({
      url: "https://download.pytorch.org/whl/cu121",
      packages: ["torch", "torchvision"],
    });
    expect(Object.isFrozen(index)).toBe(true);
    expect(Object.isFrozen(index.packages)).toBe(true);
  });

  it("accepts file:// indexes", () => {
    expect(pipIndex({ url: "file:///srv/wheels", packages: ["mylib"] }).url).toBe("file:///srv/wheels");
  });

  it("rejects a non-URL, an empty package list and bad names", () => {
    expect(issuesOf(() => pipIndex({ url: "download.pytorch.org", packages: [] }))).toEqual([
      {
        path: "pipIndex.url",
        message: 'expected an http://, https:// or file:// URL, received "download.pytorch.org"',
      },
      { path: "pipIndex.packages", message: "expected at least one package name" },
    ]);
    expect(issuesOf(() => pipIndex({ url: "https://x.org", packages: ["ok", "-bad"] }))[0]?.path).toBe(
      "pipIndex.packages[1]",
    );
  });
});

describe("envHash", () => {
  const base = image({
    python: "3.12",
    pip: ["torch", "numpy"],
    apt: ["ffmpeg"],
    env: { A: "1", B: "2" },
    shellVars: { SHA: "git rev-parse HEAD" },
    includes: ["./src"],
    pipIndexes: [{ url: "https://download.pytorch.org/whl/cu121", packages: ["torch"] }],
  });

  it("is 12 hex characters and deterministic", () => {
    expect(envHash(base)).toMatch(/^[0-9a-f]{12}$/);
    expect(envHash(base)).toBe(envHash(image({ ...base })));
    expect(envHash(DEFAULT_IMAGE)).toBe(envHash(image()));
  });

  it("does not depend on env key order", () => {
    expect(envHash(image({ ...base, env: { B: "2", A: "1" } }))).toBe(envHash(base));
  });

  it("treats package lists as sets", () => {
    expect(envHash(image({ ...base, pip: ["numpy", "torch", "numpy"] }))).toBe(envHash(base));
    expect(envHash(image({ ...base, includes: ["./src", "./src"] }))).toBe(envHash(base));
  });

  it.each<[string, ImageInput]>([
    ["pip", { pip: ["torch", "numpy", "scipy"] }],
    ["python", { python: "3.13" }],
    ["an env value", { env: { A: "1", B: "3" } }],
    ["an env key", { env: { A: "1", C: "2" } }],
    ["apt", { apt: ["ffmpeg", "git"] }],
    ["pipIndexes", { pipIndexes: [{ url: "https://download.pytorch.org/whl/cu124", packages: ["torch"] }] }],
    [
      "a pip index's dependenciesFromDefault",
      {
        pipIndexes: [
          {
            url: "https://download.pytorch.org/whl/cu121",
            packages: ["torch"],
            dependenciesFromDefault: true,
          },
        ],
      },
    ],
    ["shellVars", { shellVars: { SHA: "git rev-parse --short HEAD" } }],
    ["includes", { includes: ["./src", "./lib"] }],
    ["excludes", { excludes: ["*.ckpt"] }],
  ])("changes when %s changes", (_label, change) => {
    expect(envHash(image({ ...base, ...change }))).not.toBe(envHash(base));
  });

  it("does not move a value from env to shellVars unnoticed", () => {
    expect(envHash(image({ env: { X: "1" } }))).not.toBe(envHash(image({ shellVars: { X: "1" } })));
  });

  it("ignores metrics and the bootstrap timeout", () => {
    expect(envHash(image({ ...base, metrics: null }))).toBe(envHash(base));
    expect(envHash(image({ ...base, metrics: [metrics.Disk("/data")] }))).toBe(envHash(base));
    expect(envHash(image({ ...base, bootstrapTimeout: 1200 }))).toBe(envHash(base));
  });
});

describe("contentHash", () => {
  const base = image({ pip: ["torch"] });

  it("is 12 hex characters, changes with the version and differs from envHash", () => {
    expect(contentHash(base, "0.1.0")).toMatch(/^[0-9a-f]{12}$/);
    expect(contentHash(base, "0.1.0")).toBe(contentHash(image({ pip: ["torch"] }), "0.1.0"));
    expect(contentHash(base, "0.1.0")).not.toBe(contentHash(base, "0.2.0"));
    expect(contentHash(base, "0.1.0")).not.toBe(envHash(base));
  });

  it("changes with the environment too", () => {
    expect(contentHash(image({ pip: ["jax"] }), "0.1.0")).not.toBe(contentHash(base, "0.1.0"));
  });

  it("rejects an empty version", () => {
    expect(issuesOf(() => contentHash(base, ""))).toEqual([
      { path: "skywardVersion", message: "expected a non-empty version string" },
    ]);
  });
});

describe("extendImage", () => {
  const base = image({
    python: "3.12",
    pip: ["numpy"],
    apt: ["git"],
    env: { A: "1", B: "2" },
    shellVars: { HOST: "hostname" },
    includes: ["./src"],
    excludes: ["*.pyc"],
    pipIndexes: [{ url: "https://a.org/simple", packages: ["x"] }],
  });

  it("appends lists and merges variables, the additions winning", () => {
    const extended = extendImage(base, {
      pip: ["torch"],
      apt: ["ffmpeg"],
      env: { B: "override", C: "3" },
      shellVars: { SHA: "git rev-parse HEAD" },
      includes: ["./lib"],
      excludes: ["*.ckpt"],
      pipIndexes: [{ url: "https://b.org/simple", packages: ["y"] }],
    });
    expect(extended.pip).toEqual(["numpy", "torch"]);
    expect(extended.apt).toEqual(["git", "ffmpeg"]);
    expect(extended.env).toEqual({ A: "1", B: "override", C: "3" });
    expect(extended.shellVars).toEqual({ HOST: "hostname", SHA: "git rev-parse HEAD" });
    expect(extended.includes).toEqual(["./src", "./lib"]);
    expect(extended.excludes).toEqual(["*.pyc", "*.ckpt"]);
    expect(extended.pipIndexes.map((index) => index.url)).toEqual([
      "https://a.org/simple",
      "https://b.org/simple",
    ]);
    expect(extended.python).toBe("3.12");
    expect(Object.isFrozen(extended)).toBe(true);
  });

  it("leaves the original untouched and skips entries already present", () => {
    const extended = extendImage(base, {
      pip: ["numpy", "torch"],
      pipIndexes: [{ url: "https://a.org/simple", packages: ["x"] }],
    });
    expect(extended.pip).toEqual(["numpy", "torch"]);
    expect(extended.pipIndexes).toHaveLength(1);
    expect(base.pip).toEqual(["numpy"]);
  });

  it("replaces python and bootstrapTimeout when given", () => {
    const extended = extendImage(base, { python: "3.13", bootstrapTimeout: 600 });
    expect(extended.python).toBe("3.13");
    expect(extended.bootstrapTimeout).toBe(600);
  });

  it("appends metrics, keeps disabled telemetry disabled, and can disable it", () => {
    const withDisk = extendImage(base, { metrics: [metrics.Disk("/data")] });
    expect(withDisk.metrics?.map((collector) => collector.collector)).toEqual([
      "cpu",
      "memory",
      "gpu",
      "gpu_memory",
      "disk",
    ]);
    expect(extendImage(image({ metrics: null }), { metrics: [metrics.CPU()] }).metrics).toBeNull();
    expect(extendImage(base, { metrics: null }).metrics).toBeNull();
  });

  it("validates the additions, naming their paths", () => {
    expect(issuesOf(() => extendImage(base, { pip: ["ok", "-e ."] }))[0]?.path).toBe("image.pip[1]");
    expect(issuesOf(() => extendImage(base, { env: { "9LIVES": "x" } }))).toEqual([
      {
        path: 'image.env["9LIVES"]',
        message: 'expected a variable name matching [A-Za-z_][A-Za-z0-9_]*, received "9LIVES"',
      },
    ]);
    expect(issuesOf(() => extendImage(base, loose({ aptt: ["x"] })))).toEqual([
      { path: "image.aptt", message: "unknown field" },
    ]);
  });
});
