/**
 * The upload's tar writer: files from a local path or from memory, checked and sized up front, then
 * streamed as ustar (with pax records for long names and large sizes) for the remote `tar -x`.
 */

import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { ConfigurationError, SkywardError } from "@skyward/core";

/** One file to upload: from a local path or from memory. */
export type SshUploadFile =
  | {
      /** A local file, streamed (never read whole into memory). */
      readonly source: string;
      /** Path inside the remote directory, `/`-separated and relative. */
      readonly target: string;
      /** Permission bits (`0o755`). Default: the local file's. */
      readonly mode?: number;
    }
  | {
      /** The file's content. */
      readonly content: string | Uint8Array;
      /** Path inside the remote directory, `/`-separated and relative. */
      readonly target: string;
      /** Permission bits. Default `0o644`. */
      readonly mode?: number;
    };

const blockSize = 512;
/** The largest size the 11 octal digits of a ustar header hold. */
const ustarMaxSize = 0o77777777777;

function writeOctal(header: Buffer, offset: number, length: number, value: number): void {
  header.write(`${value.toString(8).padStart(length - 1, "0")}\0`, offset, length, "latin1");
}

/** One 512-byte ustar header. */
function ustarHeader(fields: {
  name: Buffer;
  prefix: Buffer;
  mode: number;
  size: number;
  type: string;
}): Buffer {
  const header = Buffer.alloc(blockSize);
  fields.name.copy(header, 0);
  writeOctal(header, 100, 8, fields.mode);
  writeOctal(header, 108, 8, 0); // uid
  writeOctal(header, 116, 8, 0); // gid
  writeOctal(header, 124, 12, fields.size);
  writeOctal(header, 136, 12, Math.floor(Date.now() / 1000));
  header.write(fields.type, 156, 1, "latin1");
  header.write("ustar\0", 257, 6, "latin1");
  header.write("00", 263, 2, "latin1");
  fields.prefix.copy(header, 345);
  // The checksum is computed with its own field as spaces.
  header.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "latin1");
  return header;
}

/** Splits a path into ustar `prefix` (≤ 155 bytes) and `name` (≤ 100 bytes) at a `/`, when it can. */
function splitUstarPath(path: string): { name: Buffer; prefix: Buffer } | undefined {
  const whole = Buffer.from(path, "utf8");
  if (whole.length <= 100) return { name: whole, prefix: Buffer.alloc(0) };
  for (let index = path.indexOf("/"); index !== -1; index = path.indexOf("/", index + 1)) {
    const prefix = Buffer.from(path.slice(0, index), "utf8");
    const name = Buffer.from(path.slice(index + 1), "utf8");
    if (prefix.length <= 155 && name.length <= 100 && name.length > 0) return { name, prefix };
  }
  return undefined;
}

/** A pax extended header record: `LENGTH key=value\n`, the length counting itself. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const bodyLength = Buffer.byteLength(body, "utf8");
  let length = bodyLength + String(bodyLength).length;
  if (String(length).length + bodyLength !== length) length = bodyLength + String(length).length;
  return `${length}${body}`;
}

function padding(size: number): Buffer {
  const rest = size % blockSize;
  return Buffer.alloc(rest === 0 ? 0 : blockSize - rest);
}

/** The headers of one file: a pax header first when its path or size does not fit ustar. */
function fileHeaders(path: string, size: number, mode: number): Buffer[] {
  const split = splitUstarPath(path);
  const records = [
    ...(split === undefined ? [paxRecord("path", path)] : []),
    ...(size > ustarMaxSize ? [paxRecord("size", String(size))] : []),
  ];
  const headers: Buffer[] = [];
  if (records.length > 0) {
    const pax = Buffer.from(records.join(""), "utf8");
    headers.push(
      ustarHeader({
        name: Buffer.from("../@PaxHeader"),
        prefix: Buffer.alloc(0),
        mode: 0o644,
        size: pax.length,
        type: "x",
      }),
      pax,
      padding(pax.length),
    );
  }
  const fallbackName = Buffer.from(path, "utf8").subarray(0, 100);
  headers.push(
    ustarHeader({
      name: split?.name ?? fallbackName,
      prefix: split?.prefix ?? Buffer.alloc(0),
      mode: mode & 0o7777,
      size: size > ustarMaxSize ? 0 : size,
      type: "0",
    }),
  );
  return headers;
}

export interface PreparedFile {
  readonly target: string;
  readonly mode: number;
  readonly size: number;
  readonly source?: string;
  readonly content?: Buffer;
}

/** A POSIX tar stream of `files`, local files streamed in chunks. */
export async function* tarStream(files: readonly PreparedFile[]): AsyncGenerator<Buffer> {
  for (const file of files) {
    yield* fileHeaders(file.target, file.size, file.mode);
    if (file.content !== undefined) {
      yield file.content;
    } else if (file.source !== undefined && file.size > 0) {
      let read = 0;
      for await (const chunk of createReadStream(file.source, {
        start: 0,
        end: file.size - 1,
        highWaterMark: 256 * 1024,
      })) {
        read += (chunk as Buffer).length;
        yield chunk as Buffer;
      }
      if (read !== file.size) {
        throw new SkywardError({
          message: `${file.source} changed while it was being uploaded (expected ${file.size} bytes, read ${read})`,
        });
      }
    }
    const tail = padding(file.size);
    if (tail.length > 0) yield tail;
  }
  yield Buffer.alloc(2 * blockSize);
}

function validateUploadTarget(target: string): string | undefined {
  if (target === "" || target.startsWith("/")) return "expected a relative path";
  if (target.includes("\0")) return "must not contain a NUL character";
  const parts = target.split("/");
  if (parts.some((part) => part === "..")) return "must not contain `..`";
  if (parts.at(-1) === "" || parts.at(-1) === ".") return "expected a file path, not a directory";
  return undefined;
}

/**
 * A POSIX tar stream of `files` (checked first, as an upload checks them), for a command that
 * unpacks it with `tar -x` somewhere other than over SSH (a container's exec stream).
 *
 * @throws {ConfigurationError} naming each file whose target or mode is not usable.
 */
export async function tarArchive(files: readonly SshUploadFile[]): Promise<AsyncGenerator<Buffer>> {
  return tarStream(await prepareUpload(files));
}

export async function prepareUpload(files: readonly SshUploadFile[]): Promise<PreparedFile[]> {
  const issues: { path: string; message: string }[] = [];
  const prepared: PreparedFile[] = [];
  for (const [index, file] of files.entries()) {
    const problem = validateUploadTarget(file.target);
    if (problem !== undefined) {
      issues.push({ path: `files[${index}].target`, message: problem });
      continue;
    }
    const target = file.target
      .split("/")
      .filter((part) => part !== "" && part !== ".")
      .join("/");
    if (file.mode !== undefined && (!Number.isInteger(file.mode) || file.mode < 0 || file.mode > 0o7777)) {
      issues.push({ path: `files[${index}].mode`, message: "expected permission bits from 0 to 0o7777" });
      continue;
    }
    if ("content" in file) {
      const content =
        typeof file.content === "string" ? Buffer.from(file.content, "utf8") : Buffer.from(file.content);
      prepared.push({ target, mode: file.mode ?? 0o644, size: content.length, content });
      continue;
    }
    try {
      const info = await stat(file.source);
      if (!info.isFile()) {
        issues.push({ path: `files[${index}].source`, message: `${file.source} is not a regular file` });
        continue;
      }
      prepared.push({ target, mode: file.mode ?? info.mode & 0o7777, size: info.size, source: file.source });
    } catch (error) {
      issues.push({
        path: `files[${index}].source`,
        message: `cannot read ${file.source}: ${error instanceof Error ? error.message : String(error)}`,
      });
    }
  }
  if (issues.length > 0) throw new ConfigurationError({ issues });
  return prepared;
}
