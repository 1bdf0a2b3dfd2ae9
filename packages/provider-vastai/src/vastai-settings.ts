/** The Vast.ai provider's settings, declared once as a zod schema (the public type is its input). */
import { containerImageSchema } from "@skyward/core/contract";
import {
  type ContainerSettingsSchema,
  containerSettingsSchema,
  httpSettingsShape,
  millisecondsField,
  rateLimitsField,
  shellSafePathField,
} from "@skyward/provider-utils";
import { z } from "zod";
import { ONSTART_MAX_LENGTH, onstartScript } from "./onstart-script.js";

/** The image instances run when none is set: Vast.ai's base image, tagged for the host's CUDA by Vast.ai. */
export const DEFAULT_VASTAI_IMAGE = "vastai/base-image:@vastai-automatic-tag";

const settingsShape = {
  /** The API key. Default: the `VAST_API_KEY` environment variable, read on the first API call. A secret: never logged. */
  apiKey: httpSettingsShape.apiKey,
  /** Lowest host reliability (0–1) an offer may have. Default 0.95. */
  minReliability: z.number().min(0).max(1, { message: "expected a reliability from 0 to 1" }).default(0.95),
  /** Only verified hosts. Default true. */
  verifiedOnly: z.boolean().default(true),
  /** Lowest CUDA version the host's driver must support (`cuda_max_good`), raised by a `DockerImage`'s. Default 12.0. */
  minCuda: z.number().min(0).default(12),
  /** Only hosts in this country (`"US"`, asked of the search); a spec's `region` does the same. */
  geolocation: z.string().min(1).optional(),
  /** The bid of an interruptible instance, as a multiple of the offer's minimum bid. Default 1.2. */
  bidMultiplier: z.number().min(1, { message: "expected a multiplier >= 1" }).default(1.2),
  /** The Docker image (a tag or a `DockerImage`), any with `python3`. Default {@link DEFAULT_VASTAI_IMAGE}. */
  dockerImage: containerImageSchema.default(DEFAULT_VASTAI_IMAGE),
  /** Disk per instance, GB; a spec's `diskGb` raises it. Default 50. */
  diskGb: z.number().int().min(8, { message: "expected at least 8 GB" }).default(50),
  /** `"direct"` (default): to the public address and the port mapped to 22; `"proxy"`: Vast.ai's SSH proxy. */
  ssh: z.enum(["direct", "proxy"]).default("direct"),
  /** Seconds without a running worker after which an instance destroys itself; 0 disables. Default 1800. */
  watchdogGraceSeconds: z.number().int().min(0).default(1800),
  /** How many offers one search returns at most. Default 64. */
  searchLimit: z.number().int().min(1).max(1000).default(64),
  /** The least time between two rent calls, ms: Vast.ai's limit (4.5 s per key) plus 10 %. Default 4950. */
  createIntervalMs: millisecondsField().default(4950),
  /** How long Vast.ai refuses create calls after one came too early, ms. Default 12000. */
  rateLimitPenaltyMs: millisecondsField().default(12_000),
  /** Other calls' limits, `requests` per `perSeconds`. Default Vast.ai's documented ones. */
  rateLimits: rateLimitsField(["search", "get", "list", "destroy"]),
  /** Skyward's directory on each instance; `{id}` in it becomes the instance's id. Default `/opt/skyward`. */
  root: shellSafePathField().optional(),
};

/**
 * Every setting checked, unknown ones refused by name (its type written out keeps each key's TSDoc
 * published); a `root` that makes the `onstart` script longer than Vast.ai accepts is refused here,
 * before any call (Vast.ai would refuse every rent).
 */
export const settingsSchema: ContainerSettingsSchema<typeof settingsShape> = containerSettingsSchema(
  settingsShape,
).superRefine((settings, context) => {
  if (settings.root === undefined) return;
  const length = onstartScript(settings, Number.POSITIVE_INFINITY).length;
  if (length > ONSTART_MAX_LENGTH)
    context.addIssue({
      code: "custom",
      path: ["root"],
      message: `expected a shorter path: with it the onstart script has ${length} characters, Vast.ai accepts ${ONSTART_MAX_LENGTH}`,
    });
});

/** Settings of the Vast.ai provider; every field is optional. */
export type VastAISettings = z.input<typeof settingsSchema>;

/** How Skyward reaches instances over SSH. */
export type VastSshMode = NonNullable<VastAISettings["ssh"]>;

/** The settings as parsed. */
export type ParsedSettings = z.output<typeof settingsSchema>;
