/**
 * Where this machine's pools may be, and this machine's public address: the regions it launched pools
 * in (`$SKYWARD_HOME/aws/regions.json`, so `skyward instances`/`down` look there too), and the address
 * AWS sees it from (https://checkip.amazonaws.com), for an SSH rule open to this client only.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { ProvisionError } from "@skyward/core";
import { PROVIDER_NAME } from "./aws-api.js";

function regionsFile(): string {
  return join(process.env.SKYWARD_HOME ?? join(homedir(), ".skyward"), "aws", "regions.json");
}

async function readRegions(): Promise<Record<string, string[]>> {
  try {
    const parsed = JSON.parse(await readFile(regionsFile(), "utf8")) as unknown;
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, string[]>) : {};
  } catch {
    return {};
  }
}

/** The regions this machine launched pools in, for `endpoint` (AWS's when undefined). */
export async function rememberedRegions(endpoint: string | undefined): Promise<string[]> {
  const regions = (await readRegions())[endpoint ?? "aws"];
  return Array.isArray(regions) ? regions.filter((region) => typeof region === "string") : [];
}

/** The writes of this process, one after another: each reads what the one before it wrote. */
let writes: Promise<void> = Promise.resolve();

/**
 * Records that a pool was launched in `region` (at `endpoint`, AWS's when undefined). Pools prepared at
 * once each add theirs: the writes of this process run one after another, and since another program
 * may write the file meanwhile, it is read again until it shows the region (a few tries).
 */
export function rememberRegion(endpoint: string | undefined, region: string): Promise<void> {
  const written = writes.then(() => recordRegion(endpoint ?? "aws", region));
  writes = written.catch(() => undefined);
  return written;
}

async function recordRegion(key: string, region: string): Promise<void> {
  const file = regionsFile();
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const all = await readRegions();
    const known = Array.isArray(all[key]) ? (all[key] as string[]) : [];
    if (known.includes(region)) return;
    all[key] = [...known, region].sort();
    await mkdir(join(file, ".."), { recursive: true });
    const temporary = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
    await writeFile(temporary, `${JSON.stringify(all, null, 2)}\n`);
    await rename(temporary, file);
  }
}

/**
 * This machine's public IPv4 address as AWS sees it, from https://checkip.amazonaws.com (AWS's own
 * service; `SKYWARD_AWS_CHECKIP_URL` names another, for tests).
 */
export async function clientAddress(signal: AbortSignal): Promise<string> {
  const url = process.env.SKYWARD_AWS_CHECKIP_URL ?? "https://checkip.amazonaws.com";
  let text: string;
  try {
    const response = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(15_000)]) });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    text = (await response.text()).trim();
  } catch (error) {
    signal.throwIfAborted();
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `sshIngress "client": could not learn this machine's public address from ${url} (${(error as Error).message}); give sshIngress a list of CIDRs instead`,
      isRetryable: true,
      cause: error,
    });
  }
  if (!/^(\d{1,3})(\.\d{1,3}){3}$/.test(text))
    throw new ProvisionError({
      provider: PROVIDER_NAME,
      message: `sshIngress "client": ${url} answered something other than an IPv4 address; give sshIngress a list of CIDRs instead`,
    });
  return text;
}
