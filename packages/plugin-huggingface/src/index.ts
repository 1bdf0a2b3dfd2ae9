/**
 * `@skyward/plugin-huggingface` — Hugging Face on a Skyward pool: `transformers`, `datasets`,
 * `tokenizers` and `huggingface_hub` installed, and `HF_TOKEN` a secret of the pool (docs/secrets.md):
 * sent to the workers over their connection, in the environment of every task, written nowhere on
 * the node. `huggingface_hub` reads `HF_TOKEN` from the environment, so no login is needed:
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
import { extendImage, Plugin, type PluginV1, parseInput, type SecretsInput } from "@skyward/core/contract";
import { z } from "zod";

/** Settings of {@link huggingface}. */
export interface HuggingFaceOptions {
  /**
   * A Hugging Face access token (`hf_…`). Default: the `HF_TOKEN` environment variable of this
   * process, read when the pool starts. Without either, `HF_TOKEN` is not set (public models and
   * datasets still work).
   */
  token?: string;
  /**
   * The pip requirements to install, replacing the default `transformers`, `datasets`,
   * `tokenizers` and `huggingface_hub` (e.g. to pin versions: `["transformers==4.46.3",
   * "datasets"]`).
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

/**
 * The Hugging Face plugin: installs the Hugging Face libraries and makes `HF_TOKEN` a secret of the
 * pool, so the token is never in the image (its `env.sh`, its hash), a bootstrap op, a token file of
 * the hub's cache or a command line.
 *
 * @throws {ConfigurationError} naming the field (`huggingface.token`, `huggingface.packages[1]`)
 *   when an option is not valid; messages never repeat the token.
 */
export function huggingface(options: HuggingFaceOptions = {}): PluginV1 {
  const settings = parseInput(optionsSchema, options, "huggingface");
  const packages = [...(settings.packages ?? DEFAULT_HUGGINGFACE_PACKAGES)];
  return Plugin.create("huggingface")
    .withImageTransform(({ image }) => extendImage(image, { pip: packages }))
    .withSecrets((): SecretsInput => {
      if (settings.token) return { HF_TOKEN: { value: settings.token } };
      // Read when the pool starts, so a token set after the plugin was made still counts; checked
      // here so a malformed one is refused as the plugin's own option would be.
      const fromEnvironment = process.env.HF_TOKEN;
      if (!fromEnvironment) return {};
      parseInput(tokenSchema, fromEnvironment, "HF_TOKEN");
      return { HF_TOKEN: { env: "HF_TOKEN" } };
    });
}
