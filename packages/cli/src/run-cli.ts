/** The `skyward` command line: parses arguments, runs a command, turns errors into messages and exit codes. */
import { createInterface } from "node:readline";
import { type ParseArgsConfig, parseArgs } from "node:util";
import { ConfigurationError, version } from "@skyward/core";
import type { CommandContext } from "./command-context.js";
import { DEFAULT_DOWN_WAIT_SECONDS, DOWN_HELP, downCommand } from "./down-command.js";
import { INSTANCES_HELP, instancesCommand } from "./instances-command.js";
import { LOGS_HELP, logsCommand, parseLevelFlag, parseLinesFlag } from "./logs-command.js";
import { OFFERS_HELP, offersCommand } from "./offers-command.js";
import {
  ATTACH_HELP,
  attachCommand,
  POOLS_HELP,
  poolsCommand,
  STATUS_HELP,
  statusCommand,
} from "./pools-command.js";
import { describeError } from "./providers.js";
import { Redactor, redactStream } from "./redact.js";
import { UsageError } from "./usage-error.js";

const HELP = `Usage: skyward <command> [options]

Commands:
  offers      compare the offers of every provider, cheapest first
  instances   list the live instances Skyward started
  down        terminate instances Skyward started (one pool, or all) and remove what their pools shared
  logs        print or follow the pools' log file (~/.skyward/logs/skyward.log), by pool and level
  pools       list the pools detached with pool.detach(), with nodes, tasks and cost
  status      show one detached pool
  attach      pick a detached pool up: collect its tasks' outcomes, then detach or close it

Providers come from skyward.toml ([providers.NAME], merged over ~/.skyward/defaults.toml), else
aws, gcp, hyperstack, novita, runpod, tensordock, vastai and verda with credentials from the
environment. Run
"skyward <command> --help" for a command's options.
`;

/** Where and how {@link runCli} runs; every field defaults to this process's own. */
export interface RunCliOptions {
  /** The project directory (`skyward.toml`, provider packages). Default `process.cwd()`. */
  cwd?: string;
  /** The home directory holding `.skyward/defaults.toml`. Default the user's. */
  home?: string;
  /** Environment variables whose credential-looking values are masked in all output. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Aborts the command (Ctrl-C). */
  signal?: AbortSignal;
}

const commonOptions = {
  provider: { type: "string", multiple: true },
  json: { type: "boolean", default: false },
  timeout: { type: "string" },
  help: { type: "boolean", short: "h", default: false },
} as const;

function positiveNumber(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0)
    throw new UsageError(`${flag} expects a number > 0, received "${text}"`);
  return value;
}

/** The longest timer Node keeps (2^31 − 1 ms), in seconds: a longer `AbortSignal.timeout` fires at once. */
const MAX_TIMER_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

/** A flag in seconds that becomes a timer: > 0 and no longer than `max` (default the longest timer). */
function timerSeconds(flag: string, text: string | undefined, max = MAX_TIMER_SECONDS): number | undefined {
  const value = positiveNumber(flag, text);
  if (value !== undefined && value > max)
    throw new UsageError(`${flag} expects at most ${max} seconds (about 24 days), received "${text}"`);
  return value;
}

/**
 * `--provider aws,runpod --provider vastai` → `["aws", "runpod", "vastai"]`; undefined when not given.
 * An empty name is refused: `--provider "$UNSET"` must not widen `down --all` to every provider.
 */
function providerList(values: readonly string[] | undefined): string[] | undefined {
  if (values === undefined) return undefined;
  return values.flatMap((value) => {
    const names = value.split(",").map((name) => name.trim());
    if (names.some((name) => name === ""))
      throw new UsageError(`--provider expects provider names, received "${value}"`);
    return names;
  });
}

/** `--pool ID`: an empty id would match instances that carry no pool tag, and clean up "every" pool. */
function poolId(value: string | undefined): string | undefined {
  if (value !== undefined && value.trim() === "")
    throw new UsageError(`--pool expects a pool id, received "${value}"`);
  return value;
}

function parse<const Options extends NonNullable<ParseArgsConfig["options"]>>(
  args: string[],
  options: Options,
) {
  try {
    return parseArgs({
      args,
      options: { ...commonOptions, ...options },
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/**
 * `pools` and `status` read the state files only: no provider is asked and no worker reached, so
 * `--provider` and `--timeout` would mean nothing there.
 */
function refuseReadOnlyFlags(
  command: string,
  values: { provider?: readonly string[] | undefined; timeout?: string | undefined },
): void {
  for (const flag of ["provider", "timeout"] as const) {
    if (values[flag] !== undefined) {
      throw new UsageError(
        `${command} takes no --${flag}: it reads the detached pools' state files, asking no provider and reaching no worker ("skyward attach ID --${flag} …" does)`,
      );
    }
  }
}

function ask(question: string): Promise<string> {
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  return new Promise((resolve) => {
    prompt.question(question, (answer) => {
      resolve(answer);
      prompt.close();
    });
    // Ctrl-D or a closed stdin: no answer, so no.
    prompt.once("close", () => resolve(""));
  });
}

async function dispatch(argv: readonly string[], base: Omit<CommandContext, "signal">, signal: AbortSignal) {
  const [command, ...args] = argv;
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    base.out(HELP);
    return command === undefined ? 2 : 0;
  }
  if (command === "--version" || command === "-v") {
    base.out(`skyward ${version}\n`);
    return 0;
  }
  const help = (text: string) => {
    base.out(text);
    return 0;
  };
  const withTimeout = (timeout: string | undefined, defaultSeconds = 60): CommandContext => {
    const seconds = timerSeconds("--timeout", timeout) ?? defaultSeconds;
    return { ...base, signal: AbortSignal.any([signal, AbortSignal.timeout(seconds * 1000)]) };
  };
  switch (command) {
    case "offers": {
      const { values } = parse(args, {
        accelerator: { type: "string" },
        spot: { type: "boolean", default: false },
        "max-price": { type: "string" },
        region: { type: "string" },
      });
      if (values.help) return help(OFFERS_HELP);
      return offersCommand(withTimeout(values.timeout), {
        accelerator: values.accelerator,
        providers: providerList(values.provider),
        spot: values.spot,
        maxPrice: positiveNumber("--max-price", values["max-price"]),
        region: values.region,
        json: values.json,
      });
    }
    case "instances": {
      const { values } = parse(args, {});
      if (values.help) return help(INSTANCES_HELP);
      return instancesCommand(withTimeout(values.timeout), {
        providers: providerList(values.provider),
        json: values.json,
      });
    }
    case "down": {
      const { values } = parse(args, {
        pool: { type: "string" },
        all: { type: "boolean", default: false },
        yes: { type: "boolean", short: "y", default: false },
        wait: { type: "string" },
      });
      if (values.help) return help(DOWN_HELP);
      const waitSeconds =
        values.wait === "0"
          ? 0
          : // The default timeout is 60 s plus the wait: both must fit in one timer.
            (timerSeconds("--wait", values.wait, MAX_TIMER_SECONDS - 60) ?? DEFAULT_DOWN_WAIT_SECONDS);
      // Waiting for instances to end must fit in the timeout.
      return downCommand(withTimeout(values.timeout, 60 + waitSeconds), {
        pool: poolId(values.pool),
        all: values.all,
        providers: providerList(values.provider),
        yes: values.yes,
        json: values.json,
        waitSeconds,
      });
    }
    case "logs": {
      const { values } = parse(args, {
        file: { type: "string" },
        pool: { type: "string" },
        level: { type: "string" },
        lines: { type: "string" },
        follow: { type: "boolean", short: "f", default: false },
      });
      if (values.help) return help(LOGS_HELP);
      if (values.provider !== undefined) throw new UsageError("logs takes no --provider");
      // No default timeout: --follow runs until Ctrl-C (or --timeout, when given).
      const seconds = timerSeconds("--timeout", values.timeout);
      return logsCommand(
        {
          ...base,
          signal:
            seconds === undefined ? signal : AbortSignal.any([signal, AbortSignal.timeout(seconds * 1000)]),
        },
        {
          file: values.file,
          pool: poolId(values.pool),
          level: parseLevelFlag(values.level),
          lines: parseLinesFlag(values.lines, 100),
          follow: values.follow,
          json: values.json,
        },
      );
    }
    case "pools": {
      const { values } = parse(args, {});
      if (values.help) return help(POOLS_HELP);
      refuseReadOnlyFlags("pools", values);
      return poolsCommand({ ...base, signal }, { json: values.json });
    }
    case "status":
    case "attach": {
      const [id, ...rest] = args;
      if (id === "--help" || id === "-h") return help(command === "status" ? STATUS_HELP : ATTACH_HELP);
      if (id === undefined || id.startsWith("-"))
        throw new UsageError(`${command} expects a pool id (see "skyward pools")`);
      const { values } = parse(rest, { close: { type: "boolean", default: false } });
      if (values.help) return help(command === "status" ? STATUS_HELP : ATTACH_HELP);
      if (command === "status") {
        if (values.close) throw new UsageError("status takes no --close");
        refuseReadOnlyFlags("status", values);
        return statusCommand({ ...base, signal }, id, { json: values.json });
      }
      return attachCommand({ ...base, signal }, id, {
        close: values.close,
        json: values.json,
        providers: providerList(values.provider),
        timeoutSeconds: timerSeconds("--timeout", values.timeout),
      });
    }
    default:
      throw new UsageError(
        `unknown command "${command}" (expected offers, instances, down, logs, pools, status or attach)`,
      );
  }
}

/**
 * Runs the `skyward` command with `argv` (the arguments after `skyward`) and resolves with its exit
 * code: 0 on success, 1 when the command failed, 2 for a usage or configuration mistake. It writes to
 * this process's stdout and stderr, and while it runs every write there — provider code's too — has
 * the run's secrets masked (credential-looking environment variables and provider settings).
 */
export async function runCli(argv: readonly string[], options: RunCliOptions = {}): Promise<number> {
  const redactor = new Redactor();
  redactor.addEnvironment(options.env ?? process.env);
  const restoreStdout = redactStream(process.stdout, redactor);
  const restoreStderr = redactStream(process.stderr, redactor);
  const base: Omit<CommandContext, "signal"> = {
    cwd: options.cwd ?? process.cwd(),
    home: options.home,
    redactor,
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    interactive: process.stdin.isTTY === true,
    ask,
  };
  try {
    return await dispatch(argv, base, options.signal ?? new AbortController().signal);
  } catch (error) {
    if (error instanceof UsageError) {
      base.err(`skyward: ${error.message}\nRun "skyward --help" for usage.\n`);
      return 2;
    }
    if (ConfigurationError.isInstance(error)) {
      base.err(`skyward: ${error.message}\n`);
      return 2;
    }
    base.err(`skyward: ${describeError(error)}\n`);
    if (process.env.SKYWARD_DEBUG && error instanceof Error && error.stack) base.err(`${error.stack}\n`);
    return 1;
  } finally {
    restoreStderr();
    restoreStdout();
  }
}
