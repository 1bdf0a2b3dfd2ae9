/**
 * The settings of `Acme(settings)` (and of a `[providers.NAME]` table of `skyward.toml`), checked
 * with zod: every field refused by name when it is not usable.
 */
import { parseInput } from "@skyward/core/contract";
import { httpSettingsShape, keysDirectorySchema } from "@skyward/provider-utils";
import { z } from "zod";

/** Settings of `Acme`. */
export interface AcmeSettings {
  /** The API's base URL. Default `https://api.acme.example`. */
  apiUrl?: string;
  /** Where machines are created, when an account has several. Default: every region's machine types. */
  region?: string;
  /** The API key. Default: `$ACME_API_KEY`, read on the first request. Never logged. */
  apiKey?: string;
  /** Retries of a request that is safe to repeat. Default 4. */
  maxRetries?: number;
  /** The first retry's delay, milliseconds (doubled each time). Default 1000. */
  retryDelayMs?: number;
  /** Each request's deadline, milliseconds. Default 30000. */
  requestTimeoutMs?: number;
  /** Where the SSH key pair is kept. Default `~/.skyward/keys`. */
  keysDirectory?: string;
}

const settingsSchema = z.strictObject({
  apiUrl: z.url({ error: "expected the API's base URL" }).default("https://api.acme.example"),
  region: z.string().min(1, { message: "expected a region name" }).optional(),
  ...httpSettingsShape,
  keysDirectory: keysDirectorySchema,
});

/** The settings as checked, defaults filled in. */
export type ParsedAcmeSettings = z.output<typeof settingsSchema>;

/** Checks `settings`; `label` names them in errors (`"Acme"`, or `""` for a TOML table). */
export function parseAcmeSettings(settings: unknown, label: string): ParsedAcmeSettings {
  return parseInput(settingsSchema, settings, label);
}
