/**
 * The self-destruct's one retry rule, run by a real shell, real curl and real Python 3 against a local
 * HTTP server that answers as a cloud's API does (a 429, a 5xx, a 404 for a machine already gone): the
 * key reaches the API as a header and never a process's arguments (each command is wrapped to record them).
 */
import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  curlDeleteRequest,
  deleteRequest,
  pythonDeleteRequest,
  retriedPython,
  retriedShell,
  SELF_DESTRUCT_RETRY,
  type SelfDestructRequest,
} from "./self-destruct-retry.js";

const run = promisify(execFile);
const KEY = "self-destruct-test-key-9f3c";

interface Received {
  readonly method: string;
  readonly path: string;
  readonly authorization: string | undefined;
  readonly body: string;
}

let server: Server;
let url: string;
let directory: string;
/** The status of each request to come, in order; once used up, `then`. */
let answers: number[] = [];
let then = 200;
let received: Received[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      const { method = "", url: path = "", headers } = request;
      received.push({ method, path, authorization: headers.authorization, body });
      response.writeHead(answers.shift() ?? then).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  directory = await mkdtemp(join(tmpdir(), "skyward-self-destruct-retry-"));
  // curl and python3 wrapped: each records its arguments on one line, then runs the real one.
  await mkdir(join(directory, "bin"));
  const where = async (command: string) => (await run("sh", ["-c", `command -v ${command}`])).stdout.trim();
  const tr = await where("tr");
  for (const command of ["curl", "python3"]) {
    const wrapper = join(directory, "bin", command);
    const record = `{ printf '%s' "$*" | ${tr} '\\n' ' '; echo; } >> ${join(directory, "arguments")}`;
    await writeFile(wrapper, `#!/bin/sh\n${record}\nexec ${await where(command)} "$@"\n`);
    await chmod(wrapper, 0o755);
  }
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(directory, { recursive: true, force: true });
});

beforeEach(async () => {
  answers = [];
  then = 200;
  received = [];
  await rm(join(directory, "arguments"), { force: true });
});

/** Runs `script` with `sh`, the key in `$API_KEY`, retries at once; its exit status. */
async function status(
  script: string,
  path = `${join(directory, "bin")}:${process.env.PATH}`,
): Promise<number> {
  const env = { PATH: path, API_KEY: KEY, SKYWARD_RETRY_SECONDS: "0" };
  return run("/bin/sh", ["-c", script], { env }).then(
    () => 0,
    (error: { code?: number }) => error.code ?? -1,
  );
}

const fromVariable = { variable: "API_KEY", prefix: "Authorization: Bearer " } as const;
const request = (overrides: Partial<SelfDestructRequest> = {}): SelfDestructRequest => ({
  method: "DELETE",
  url: `"${url}/machines/$MACHINE"`,
  header: fromVariable,
  ...overrides,
});

// Twenty Python processes on a loaded machine take seconds: generous timeouts, nothing timed.
describe("the self-destruct's request, by curl and by Python", { timeout: 120_000 }, () => {
  for (const [name, render] of [
    ["curl", curlDeleteRequest],
    ["python3", pythonDeleteRequest],
  ] as const) {
    it(`${name}: a 429 and a 503 are tried again, a 2xx ends it; the key only in a header`, async () => {
      answers = [429, 503];
      expect(await status(`MACHINE=m-1; ${retriedShell(render(request()))}`)).toBe(0);
      expect(received).toEqual(
        Array(3).fill({ method: "DELETE", path: "/machines/m-1", authorization: `Bearer ${KEY}`, body: "" }),
      );
      const argumentsSeen = await readFile(join(directory, "arguments"), "utf8");
      expect(argumentsSeen.trim().split("\n")).toHaveLength(3);
      expect(argumentsSeen).toContain("/machines/m-1");
      expect(argumentsSeen).not.toContain(KEY);
    });

    it(`${name}: a machine already gone (404) is deleted; refused every time, it fails after ${SELF_DESTRUCT_RETRY.attempts} tries`, async () => {
      then = 404;
      expect(await status(`MACHINE=m-2; ${retriedShell(render(request()))}`)).toBe(0);
      expect(received).toHaveLength(1);
      received = [];
      then = 500;
      expect(await status(`MACHINE=m-2; ${retriedShell(render(request()))}`)).toBe(1);
      expect(received).toHaveLength(SELF_DESTRUCT_RETRY.attempts);
    });

    it(`${name}: the key from a file, a JSON body sent`, async () => {
      const headerFile = join(directory, "auth");
      await writeFile(headerFile, `Authorization: Bearer ${KEY}\n`, { mode: 0o600 });
      const post = request({
        method: "POST",
        url: `"${url}/machines/delete"`,
        header: { file: `"${headerFile}"` },
        body: `'{"id":"'"$MACHINE"'"}'`,
      });
      expect(await status(`MACHINE=m-3; ${retriedShell(render(post))}`)).toBe(0);
      expect(received).toEqual([
        { method: "POST", path: "/machines/delete", authorization: `Bearer ${KEY}`, body: '{"id":"m-3"}' },
      ]);
      expect(await readFile(join(directory, "arguments"), "utf8")).not.toContain(KEY);
    });
  }

  it("an API that cannot be reached is tried again, every time", async () => {
    const unreachable = request({ url: '"http://127.0.0.1:9/machines/m-4"' });
    expect(await status(retriedShell(curlDeleteRequest(unreachable)))).toBe(1);
    const calls = (await readFile(join(directory, "arguments"), "utf8")).trim().split("\n");
    expect(calls).toHaveLength(SELF_DESTRUCT_RETRY.attempts);
  });

  it("without curl on the machine, Python 3 sends the request", async () => {
    // A PATH holding python3 (the wrapper) and the shell's own tools, but no curl.
    const onlyPython = join(directory, "only-python");
    await mkdir(onlyPython, { recursive: true });
    await writeFile(join(onlyPython, "python3"), await readFile(join(directory, "bin", "python3")));
    await chmod(join(onlyPython, "python3"), 0o755);
    expect(await status(`MACHINE=m-5; ${retriedShell(deleteRequest(request()))}`, onlyPython)).toBe(0);
    expect(received).toEqual([
      { method: "DELETE", path: "/machines/m-5", authorization: `Bearer ${KEY}`, body: "" },
    ]);
    // With curl there, curl sends it.
    expect(await status(`MACHINE=m-6; ${retriedShell(deleteRequest(request()))}`)).toBe(0);
    expect((await readFile(join(directory, "arguments"), "utf8")).trim().split("\n")).toEqual([
      expect.stringMatching(/^-c import sys.* DELETE .*\/machines\/m-5$/),
      expect.stringMatching(/^-sS .*-X DELETE -H @- .*\/machines\/m-6$/),
    ]);
  });

  it("a header prefix holding a single quote is refused (it would end the shell word)", () => {
    expect(() => curlDeleteRequest(request({ header: { variable: "K", prefix: "X-It's: " } }))).toThrow(
      /single quote/,
    );
  });
});

describe("the same rule in Python", () => {
  it("a call raising is tried again, by the same count; it exits 1 when every try failed", async () => {
    const program = (failures: number) =>
      [
        "import os, sys, time",
        "tries = []",
        "def delete():",
        "    tries.append(1)",
        `    if len(tries) <= ${failures}:`,
        '        raise RuntimeError("HTTP Error 429: Too Many Requests")',
        '    print("deleted after", len(tries))',
        retriedPython("delete()"),
      ].join("\n");
    const env = { ...process.env, SKYWARD_RETRY_SECONDS: "0" };
    const done = await run("python3", ["-c", program(2)], { env });
    expect(done.stdout).toBe("deleted after 3\n");
    expect(done.stderr).toContain("skyward: self-destruct failed (2 of 20): HTTP Error 429");
    const failed = await run("python3", ["-c", program(SELF_DESTRUCT_RETRY.attempts)], { env }).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect("code" in failed && failed.code).toBe(1);
    expect(failed.stderr.match(/self-destruct failed/g)).toHaveLength(SELF_DESTRUCT_RETRY.attempts);
  });
});
