/**
 * The command that starts a worker on a node, as plugins see and rewrite it, and the POSIX shell
 * quoting every rendered command line and bootstrap script relies on.
 */
import { z } from "zod";
import { SkywardError } from "../errors/errors.js";
import { parseInput } from "../errors/validation.js";

// Characters that mean nothing to a POSIX shell in any position of a word, so a word made only of
// them can stay unquoted. `=` is left out: a first word `a=b` would be a variable assignment.
const shellSafeWord = /^[A-Za-z0-9_@%+:,./-]+$/;

/**
 * Quotes `value` as ONE word for a POSIX shell (`sh`, `dash`, `bash`), so that it reaches the
 * program byte-for-byte: spaces, quotes, `$(…)`, backticks, newlines, globs and the empty string
 * included. Words made only of `[A-Za-z0-9_@%+:,./-]` are returned as they are; anything else is
 * wrapped in single quotes, with each `'` written as `'\''`.
 *
 * @throws {SkywardError} when `value` holds a NUL character, which no shell word can carry.
 */
export function shellQuote(value: string): string {
  if (value.includes("\0")) {
    throw new SkywardError({
      message: `cannot pass ${JSON.stringify(value)} through a shell: it contains a NUL character`,
    });
  }
  if (shellSafeWord.test(value)) return value;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** The three parts of a {@link LaunchCommand}, as given to {@link LaunchCommand.create} and `with`. */
export interface LaunchCommandFields {
  /**
   * Shell text that wraps the worker process, written verbatim (`accelerate launch --num_machines 4`,
   * `torchrun --nproc-per-node 8`). Empty means no wrapper: the entrypoint runs directly.
   */
  readonly launcher: string;
  /** The program or script the launcher runs (or that runs on its own); ONE word, quoted on render. */
  readonly entrypoint: string;
  /** The worker's command-line arguments (`--node-id`, `--port`, …); each one word, quoted on render. */
  readonly args: readonly string[];
}

const noNul = (field: string) =>
  z.string({ error: `expected ${field} to be a string` }).refine((value) => !value.includes("\0"), {
    message: "must not contain a NUL character",
  });

const launchCommandFieldsSchema = z.strictObject({
  launcher: z
    .string({ error: "expected the launcher to be a string (shell text)" })
    .refine((value) => !value.includes("\0"), { message: "must not contain a NUL character" })
    // A line break would end the command before the entrypoint: the launcher must stay one line.
    .refine((value) => !/[\r\n]/.test(value), { message: "must be a single line (no line breaks)" }),
  entrypoint: noNul("the entrypoint"),
  args: z.array(noNul("each argument"), { error: "expected an array of strings" }),
});

/**
 * The command that starts a worker: `launcher entrypoint args…`, rendered to one shell command line.
 * Immutable; plugins' `launcher` hooks derive new commands with {@link LaunchCommand.with}:
 *
 * ```ts
 * import { Plugin } from "@skyward/core/contract";
 *
 * Plugin.create("accelerate").withLauncher(({ command, context }) =>
 *   command.with({ launcher: `accelerate launch --num_machines ${context.numNodes}` }));
 * ```
 */
export class LaunchCommand implements LaunchCommandFields {
  /** Shell text wrapping the worker, verbatim; empty when there is none. */
  readonly launcher: string;
  /** The program or script run; empty when the launcher alone names what to run. */
  readonly entrypoint: string;
  /** The worker's arguments, in order. */
  readonly args: readonly string[];

  private constructor(fields: LaunchCommandFields) {
    this.launcher = fields.launcher;
    this.entrypoint = fields.entrypoint;
    this.args = Object.freeze([...fields.args]);
    Object.freeze(this);
  }

  /**
   * Creates a command; omitted parts are empty.
   *
   * @throws {ConfigurationError} naming the field when a part is not a string (array of strings for
   *   `args`), holds a NUL character, or (the launcher) a line break.
   */
  static create(fields: Partial<LaunchCommandFields> = {}): LaunchCommand {
    const parsed = parseInput(launchCommandFieldsSchema, {
      launcher: fields.launcher ?? "",
      entrypoint: fields.entrypoint ?? "",
      args: fields.args ?? [],
    });
    return new LaunchCommand(parsed);
  }

  /** A copy with the given parts replaced; this command is left unchanged. */
  with(changes: Partial<LaunchCommandFields>): LaunchCommand {
    return LaunchCommand.create({
      launcher: changes.launcher ?? this.launcher,
      entrypoint: changes.entrypoint ?? this.entrypoint,
      args: changes.args ?? this.args,
    });
  }

  /**
   * Renders ONE shell command line: the launcher verbatim (it is shell syntax written by plugin
   * code), then the entrypoint and each argument quoted with {@link shellQuote}. An empty launcher
   * or entrypoint is left out; empty arguments are kept (as `''`).
   */
  render(): string {
    const words: string[] = [];
    if (this.launcher.trim() !== "") words.push(this.launcher);
    if (this.entrypoint !== "") words.push(shellQuote(this.entrypoint));
    for (const arg of this.args) words.push(shellQuote(arg));
    return words.join(" ");
  }

  /** The rendered command line (same as {@link LaunchCommand.render}). */
  toString(): string {
    return this.render();
  }
}

/** What a plugin's `launcher` hook knows about the node whose worker it is about to start. */
export interface LaunchContext {
  /** This node's index in the pool; 0 is the head. */
  readonly nodeId: number;
  /** How many nodes the pool has. */
  readonly numNodes: number;
  /** The head node's private address, reachable from every node. */
  readonly headAddr: string;
  /** The port the head's coordination services listen on (rendezvous for launchers such as `accelerate`). */
  readonly headPort: number;
  /** This node's private address. */
  readonly privateIp: string;
  /** The Python interpreter inside the node's virtual environment. */
  readonly pythonBin: string;
  /** The node's virtual environment directory. */
  readonly venvDir: string;
  /**
   * The node's Skyward root directory: `$SKYWARD_ROOT` of the plugins' bootstrap ops, where a file an
   * op wrote (accelerate's config) is found. Set by the pool; when missing, the venv's parent.
   */
  readonly root?: string;
  /** Task slots per worker (`worker.concurrency`). */
  readonly concurrency: number;
  /** How tasks run inside the worker: in threads, or in executor subprocesses. */
  readonly executor: "thread" | "process";
  /** How many worker processes run on this node. */
  readonly workersPerNode: number;
}
