/**
 * `@skyward/plugin-huggingface` — Hugging Face on a Skyward pool: `transformers`, `datasets`,
 * `tokenizers` and `huggingface_hub` installed, `HF_TOKEN` set on the workers, and the hub logged in
 * at bootstrap — without the token reaching a log line, an event or the bootstrap script's text:
 *
 * ```ts
 * import * as sky from "@skyward/core";
 * import { huggingface } from "@skyward/plugin-huggingface";
 *
 * await using pool = await sky.compute({
 *   accelerator: sky.accelerators.A100(),
 *   plugins: [huggingface()], // the token: process.env.HF_TOKEN when the pool starts
 * });
 * ```
 */
import { extendImage, Plugin, type PluginV1, parseInput } from "@skyward/core/contract";
import { z } from "zod";

/** Settings of {@link huggingface}. */
export interface HuggingFaceOptions {
  /**
   * A Hugging Face access token (`hf_…`). Default: the `HF_TOKEN` environment variable of this
   * process, read when the pool starts. Without either, nothing is logged in and `HF_TOKEN` is not
   * set (public models and datasets still work).
   */
  token?: string;
  /**
   * The pip requirements to install, replacing the default `transformers`, `datasets`,
   * `tokenizers` and `huggingface_hub` (e.g. to pin versions: `["transformers==4.46.3",
   * "datasets"]`). `huggingface_hub` is added when the list does not name it: the login needs it.
   */
  packages?: readonly string[];
}

/** What {@link huggingface} installs when `packages` is not given. */
export const DEFAULT_HUGGINGFACE_PACKAGES: readonly string[] = Object.freeze([
  "transformers",
  "datasets",
  "tokenizers",
  "huggingface_hub",
]);

// No message below repeats the value it refuses: it may be (part of) a token.
const tokenSchema = z
  .string({ error: "expected a Hugging Face access token (a string)" })
  .refine((token) => token.length > 0, {
    error: "expected a Hugging Face access token, received an empty string",
  })
  .refine((token) => !/[\s\0]/.test(token), {
    error: "expected a Hugging Face access token without whitespace or control characters",
  });

const optionsSchema = z.strictObject({
  token: tokenSchema.optional(),
  packages: z
    .array(
      z
        .string({ error: 'expected a pip requirement like "transformers>=4.40"' })
        .min(1, { error: "expected a pip requirement, received an empty string" }),
      { error: "expected an array of pip requirements" },
    )
    .optional(),
});

/** A requirement's project name, normalized (PEP 503), to see whether a list names a package. */
function projectName(requirement: string): string {
  const name = requirement.trim().split(/[\s<>=!~;[@(]/)[0] ?? requirement;
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

/**
 * The bootstrap op that logs the hub in. The token is never in the op's text: the bootstrap
 * script sources the node's `env.sh` (mode 0600), which exports `HF_TOKEN` from the image's env,
 * and Python reads it from the environment — so it is in no command line, log or event either.
 */
const LOGIN_OP = [
  `if [ -z "\${HF_TOKEN:-}" ]; then`,
  '  echo "huggingface: no HF_TOKEN, not logging in to the hub"',
  "else",
  `  python -c 'import os; from huggingface_hub import login; login(token=os.environ["HF_TOKEN"], add_to_git_credential=False)' &&`,
  '    echo "huggingface: logged in to the hub"',
  "fi",
].join("\n");

/**
 * The Hugging Face plugin: installs the Hugging Face libraries, sets `HF_TOKEN` on the workers (the
 * image's env, which lives on each node only in its 0600 `env.sh`) and logs the hub in at
 * bootstrap, reading the token from that environment rather than from the op's text.
 *
 * @throws {ConfigurationError} naming the field (`huggingface.token`, `huggingface.packages[1]`)
 *   when an option is not valid; messages never repeat the token.
 */
export function huggingface(options: HuggingFaceOptions = {}): PluginV1 {
  const settings = parseInput(optionsSchema, options, "huggingface");
  const requested = settings.packages ?? DEFAULT_HUGGINGFACE_PACKAGES;
  const packages = requested.some((requirement) => projectName(requirement) === "huggingface-hub")
    ? [...requested]
    : [...requested, "huggingface_hub"];
  return Plugin.create("huggingface")
    .withImageTransform(({ image }) => {
      // Read when the pool starts, so a token set after the plugin was made still counts.
      const fromEnvironment = process.env.HF_TOKEN;
      const token =
        settings.token ??
        (fromEnvironment ? parseInput(tokenSchema, fromEnvironment, "HF_TOKEN") : undefined);
      return extendImage(image, { pip: packages, ...(token ? { env: { HF_TOKEN: token } } : {}) });
    })
    .withBootstrap(() => [LOGIN_OP]);
}
