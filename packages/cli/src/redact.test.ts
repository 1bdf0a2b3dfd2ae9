import { describe, expect, it } from "vitest";
import { REDACTED, Redactor, redactStream } from "./redact.js";

describe("redactStream", () => {
  it("redactStream masks every write to a stream until restored, strings and bytes alike", () => {
    const written: string[] = [];
    const stream = {
      write(chunk: string) {
        written.push(chunk);
        return true;
      },
    } as unknown as NodeJS.WriteStream;
    const redactor = new Redactor();
    redactor.add("hunter2-hunter2");
    const restore = redactStream(stream, redactor);
    stream.write("password hunter2-hunter2\n");
    stream.write(Buffer.from("again hunter2-hunter2"));
    restore();
    stream.write("hunter2-hunter2");
    expect(written).toEqual([`password ${REDACTED}\n`, `again ${REDACTED}`, "hunter2-hunter2"]);
  });
});
