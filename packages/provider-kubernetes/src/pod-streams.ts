/**
 * Byte streams into a pod through the API server, no SSH: a command run by `exec` (its stdin fed, its
 * output read, its exit code returned), and a TCP connection to a port on the pod's loopback through
 * `portforward`, as a `Duplex` the pool's protocol runs over.
 */
import { Duplex, PassThrough, Readable, Writable } from "node:stream";
import { Exec, PortForward, type V1Status } from "@kubernetes/client-node";
import { ConnectionError } from "@skyward/core";
import { type KubernetesApi, kubernetesError } from "./kubernetes-api.js";
import { WORKER_CONTAINER } from "./pods.js";

/** What a command run in a pod printed, and how it ended. */
export interface PodCommandResult {
  /** Its exit code (0 for success), or null when the stream ended without a status. */
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** How to run one command in a pod. */
export interface PodCommandOptions {
  /** Fed to the command's stdin, then closed. */
  readonly stdin?: AsyncIterable<Buffer>;
  /** Each chunk of stdout as it comes. */
  readonly onStdout?: (chunk: string) => void;
  /** Gives up (closing the stream) when aborted. */
  readonly signal?: AbortSignal;
  /** Gives up after this many seconds. */
  readonly timeoutSeconds: number;
}

/** The exit code a `V1Status` of an exec carries (`Success` is 0; `NonZeroExitCode` names its code). */
function exitCode(status: V1Status): number | null {
  if (status.status === "Success") return 0;
  const cause = status.details?.causes?.find((entry) => entry.reason === "ExitCode");
  if (cause?.message !== undefined) return Number(cause.message);
  return null;
}

/** Runs `command` with `/bin/sh -c` in the pod's worker container. */
export async function execInPod(
  api: KubernetesApi,
  pod: string,
  command: string,
  options: PodCommandOptions,
): Promise<PodCommandResult> {
  let stdout = "";
  let stderr = "";
  let code: number | null = null;
  const out = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const text = chunk.toString();
      stdout += text;
      options.onStdout?.(text);
      done();
    },
  });
  const err = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stderr += chunk.toString();
      done();
    },
  });
  const input = options.stdin !== undefined ? Readable.from(options.stdin) : null;
  const signals = [
    AbortSignal.timeout(options.timeoutSeconds * 1000),
    ...(options.signal ? [options.signal] : []),
  ];
  const signal = AbortSignal.any(signals);
  let socket: Awaited<ReturnType<Exec["exec"]>>;
  try {
    socket = await new Exec(api.config).exec(
      api.namespace,
      pod,
      WORKER_CONTAINER,
      ["/bin/sh", "-c", command],
      out,
      err,
      input,
      false,
      (status) => {
        code = exitCode(status);
        if (code === null && status.message) stderr += status.message;
      },
    );
  } catch (error) {
    throw kubernetesError({ verb: "create", resource: "pods/exec", namespace: api.namespace }, error);
  }
  await new Promise<void>((resolve, reject) => {
    const abort = () => {
      socket.close();
      reject(signal.reason);
    };
    signal.addEventListener("abort", abort, { once: true });
    socket.on("close", () => {
      signal.removeEventListener("abort", abort);
      resolve();
    });
    socket.on("error", (error: Error) => {
      signal.removeEventListener("abort", abort);
      reject(error);
    });
  });
  return { code, stdout, stderr };
}

/**
 * A connection to `port` on the pod's loopback through the API server's port-forward: one WebSocket
 * per connection, its bytes the stream's. A port nobody listens on ends the stream with an error.
 */
export async function openPodPort(
  api: KubernetesApi,
  pod: string,
  port: number,
  node: number,
): Promise<Duplex> {
  const input = new PassThrough();
  let problem = "";
  let socket:
    | { close(): void; on(event: string, listener: (...args: unknown[]) => void): unknown }
    | undefined;
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, done) {
      input.write(chunk, done);
    },
    final(done) {
      input.end();
      done();
    },
    destroy(error, done) {
      input.destroy();
      socket?.close();
      done(error);
    },
  });
  const output = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stream.push(chunk);
      done();
    },
  });
  const errors = new Writable({
    write(chunk: Buffer, _encoding, done) {
      problem += chunk.toString();
      done();
    },
  });
  try {
    const opened = await new PortForward(api.config).portForward(
      api.namespace,
      pod,
      [port],
      output,
      errors,
      input,
    );
    if (typeof opened === "function") throw new Error("port-forward returned no connection");
    socket = opened as unknown as typeof socket;
  } catch (error) {
    throw new ConnectionError({
      host: `pod ${pod}`,
      node,
      message: `port-forward to port ${port} of pod ${pod} failed: ${kubernetesError({ verb: "create", resource: "pods/portforward", namespace: api.namespace }, error).message}`,
      cause: error,
    });
  }
  socket?.on("close", () => {
    if (problem !== "") stream.destroy(new Error(`port-forward to pod ${pod}:${port}: ${problem.trim()}`));
    else stream.push(null);
  });
  socket?.on("error", (error) => stream.destroy(error as Error));
  return stream;
}
