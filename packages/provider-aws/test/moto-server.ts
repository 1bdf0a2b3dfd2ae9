/**
 * Starts and stops moto (a fake AWS) in server mode for the tests: on 127.0.0.1, on a port the
 * server picks itself (`-p 0`, read back from its banner, so two runs never race for a port).
 *
 * moto lives in a virtual environment of this package's own, `packages/provider-aws/.venv`, made by
 * `scripts/ensure-moto.sh` (which `pnpm test` runs first); `SKYWARD_MOTO_PYTHON` names another
 * interpreter that has `moto[server]`. Without one the suites skip, saying why — except under
 * CI, where a missing moto fails the run.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  DescribeImagesCommand,
  DescribeInstancesCommand,
  DescribeKeyPairsCommand,
  DescribeSecurityGroupsCommand,
  DescribeVolumesCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";
import { isCi } from "@skyward/testing";
import { type AwsDouble, startAwsDouble } from "./aws-double.js";

const packageVenvPython = fileURLToPath(new URL("../.venv/bin/python", import.meta.url));

/** The Python with moto's server, or undefined when there is none. */
export function findMotoPython(): string | undefined {
  const candidates = [process.env.SKYWARD_MOTO_PYTHON, packageVenvPython].filter(
    (candidate): candidate is string => candidate !== undefined && candidate !== "",
  );
  for (const python of candidates) {
    if (!existsSync(python)) continue;
    const probe = spawnSync(python, ["-c", "import moto.server, flask"], {
      stdio: "ignore",
      timeout: 60_000,
    });
    if (probe.status === 0) return python;
  }
  return undefined;
}

/** Why the moto suites cannot run here, or undefined. Under CI a missing moto throws instead. */
export function motoSkipReason(): string | undefined {
  if (findMotoPython()) return undefined;
  const reason =
    "moto[server] is not installed: run `pnpm --filter @skyward/provider-aws setup:moto` " +
    "(or set SKYWARD_MOTO_PYTHON to a Python that has it)";
  if (isCi()) throw new Error(reason);
  return reason;
}

/** A running moto server, behind the double of what moto lacks (`aws-double.ts`). */
export interface MotoServer {
  /** The endpoint to use, `http://127.0.0.1:PORT`: the double, in front of moto. */
  readonly endpoint: string;
  /** moto's own endpoint. */
  readonly motoEndpoint: string;
  /** The double's state: placement groups, the Price List API's prices. */
  readonly double: AwsDouble;
  /** Forgets every resource (moto's reset API). */
  reset(): Promise<void>;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s). Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts moto on `host` (default 127.0.0.1; a test bed's bridge address for its hosts to reach S3)
 * and resolves once it answers. The double stays on 127.0.0.1.
 */
export async function startMoto(options: { timeoutMs?: number; host?: string } = {}): Promise<MotoServer> {
  const python = findMotoPython();
  if (!python) throw new Error(motoSkipReason() ?? "moto is not installed");
  const host = options.host ?? "127.0.0.1";
  const child: ChildProcess = spawn(python, ["-m", "moto.server", "-H", host, "-p", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PYTHONUNBUFFERED: "1" },
  });
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  const endpoint = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`moto did not start within ${options.timeoutMs ?? 60_000} ms:\n${output}`));
    }, options.timeoutMs ?? 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = new RegExp(`Running on (http://${host.replaceAll(".", "\\.")}:\\d+)`).exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`moto exited (code ${code}) before it started:\n${output}`));
    });
  });
  // Keep draining its request log so the pipe never fills up.
  child.stdout?.resume();
  child.stderr?.resume();
  let stopped = false;
  const double = await startAwsDouble(endpoint);
  return {
    endpoint: double.endpoint,
    motoEndpoint: endpoint,
    double,
    async reset() {
      const response = await fetch(`${endpoint}/moto-api/reset`, { method: "POST" });
      if (!response.ok) throw new Error(`moto reset failed: HTTP ${response.status}`);
      double.reset();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await double.close();
      process.removeListener("exit", killOnExit);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Fake credentials and a sealed-off credential chain, for tests. Returns a function restoring the environment. */
export function useFakeAwsEnvironment(credentials: boolean = true): () => void {
  const keys = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_EC2",
    "AWS_ENDPOINT_URL_SSM",
  ];
  const saved = new Map(keys.map((key) => [key, process.env[key]]));
  for (const key of keys) delete process.env[key];
  // No file, no instance metadata service: the chain never leaves this machine.
  process.env.AWS_SHARED_CREDENTIALS_FILE = "/nonexistent/skyward-test/credentials";
  process.env.AWS_CONFIG_FILE = "/nonexistent/skyward-test/config";
  process.env.AWS_EC2_METADATA_DISABLED = "true";
  if (credentials) {
    process.env.AWS_ACCESS_KEY_ID = "testing";
    process.env.AWS_SECRET_ACCESS_KEY = "testing";
  }
  return () => {
    for (const [key, value] of saved) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  };
}

/** What is left at moto: live instances, security groups other than the default ones, key pairs, Skyward volumes. */
export interface MotoInventory {
  readonly liveInstances: string[];
  readonly securityGroups: string[];
  readonly keyPairs: string[];
  readonly skywardVolumes: string[];
}

/** Lists what is left at moto in `region`. */
export async function motoInventory(endpoint: string, region = "us-east-1"): Promise<MotoInventory> {
  const ec2 = new EC2Client({
    region,
    endpoint,
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  });
  try {
    const instances = await ec2.send(
      new DescribeInstancesCommand({
        Filters: [
          {
            Name: "instance-state-name",
            Values: ["pending", "running", "stopping", "stopped", "shutting-down"],
          },
        ],
      }),
    );
    const groups = await ec2.send(new DescribeSecurityGroupsCommand({}));
    const keys = await ec2.send(new DescribeKeyPairsCommand({}));
    const volumes = await ec2.send(
      new DescribeVolumesCommand({ Filters: [{ Name: "tag-key", Values: ["skyward:cluster"] }] }),
    );
    return {
      liveInstances: (instances.Reservations ?? []).flatMap((reservation) =>
        (reservation.Instances ?? []).map((instance) => instance.InstanceId ?? "?"),
      ),
      securityGroups: (groups.SecurityGroups ?? [])
        .filter((group) => group.GroupName !== "default")
        .map((group) => group.GroupId ?? "?"),
      keyPairs: (keys.KeyPairs ?? []).map((key) => key.KeyName ?? "?"),
      skywardVolumes: (volumes.Volumes ?? []).map((volume) => volume.VolumeId ?? "?"),
    };
  } finally {
    ec2.destroy();
  }
}

/** One of moto's Ubuntu AMIs (x86_64): moto has no Deep Learning image, so GPU offers need `amiId`. */
export async function motoUbuntuAmi(ec2: EC2Client): Promise<string> {
  const images = await ec2.send(new DescribeImagesCommand({ Owners: ["099720109477"] }));
  const id = images.Images?.find((image) => image.Architecture === "x86_64")?.ImageId;
  if (!id) throw new Error("moto has no Ubuntu image");
  return id;
}
