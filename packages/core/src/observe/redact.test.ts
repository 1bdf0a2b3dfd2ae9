import { describe, expect, it } from "vitest";
import { REDACTED, Redactor } from "./redact.js";

describe("Redactor", () => {
  it("masks credential-looking environment variables and nothing else", () => {
    const redactor = new Redactor();
    redactor.addEnvironment({
      RUNPOD_API_KEY: "rp_0123456789",
      AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG",
      GITHUB_TOKEN: "ghp_abcdef",
      HOME: "/home/someone",
      SHORT_KEY: "abc",
    });
    expect(
      redactor.redact("key rp_0123456789, secret wJalrXUtnFEMI/K7MDENG, ghp_abcdef in /home/someone abc"),
    ).toBe(`key ${REDACTED}, secret ${REDACTED}, ${REDACTED} in /home/someone abc`);
  });

  it("masks strings under credential-looking settings keys at any depth, longest first", () => {
    const redactor = new Redactor();
    redactor.addSettings({
      region: "us-east-1",
      apiKey: "secret-one",
      auth: { user: "bob-the-user", extra: ["secret-one-and-more"] },
    });
    expect(redactor.redact("secret-one-and-more / secret-one / bob-the-user / us-east-1")).toBe(
      `${REDACTED} / ${REDACTED} / ${REDACTED} / us-east-1`,
    );
  });

  it("walks settings with cycles safely, and learns secrets added after a first redaction", () => {
    const redactor = new Redactor();
    const settings: Record<string, unknown> = { token: "first-secret" };
    settings.self = settings;
    redactor.addSettings(settings);
    expect(redactor.redact("first-secret second-secret")).toBe(`${REDACTED} second-secret`);
    redactor.add("second-secret");
    expect(redactor.redact("first-secret second-secret")).toBe(`${REDACTED} ${REDACTED}`);
  });
});
