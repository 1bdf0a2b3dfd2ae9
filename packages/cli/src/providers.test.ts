import type { ProviderEntry, SkywardConfig } from "@skyward/core/config";
import { describe, expect, it } from "vitest";
import { describeError, selectProviderEntries } from "./providers.js";

function config(providers: Record<string, Omit<ProviderEntry, "name">>): SkywardConfig {
  return {
    providers: Object.fromEntries(
      Object.entries(providers).map(([name, entry]) => [name, { name, ...entry }]),
    ),
    pools: {},
    files: [],
  };
}

const names = (entries: readonly ProviderEntry[]) => entries.map((entry) => entry.name);

describe("selectProviderEntries", () => {
  it("without --provider: every configured entry, else every built-in type", () => {
    expect(names(selectProviderEntries(config({}), undefined))).toEqual([
      "aws",
      "gcp",
      "hyperstack",
      "novita",
      "runpod",
      "tensordock",
      "vastai",
      "verda",
    ]);
    const configured = config({
      east: { type: "aws", package: "@skyward/provider-aws", settings: { region: "us-east-1" } },
    });
    expect(names(selectProviderEntries(configured, []))).toEqual(["east"]);
  });

  it("--provider names an entry, every entry of a type, or a built-in type; anything else is a usage error", () => {
    const configured = config({
      east: { type: "aws", package: "@skyward/provider-aws", settings: {} },
      west: { type: "aws", package: "@skyward/provider-aws", settings: {} },
    });
    expect(names(selectProviderEntries(configured, ["west"]))).toEqual(["west"]);
    expect(names(selectProviderEntries(configured, ["aws", "east"]))).toEqual(["east", "west"]);
    const runpod = selectProviderEntries(configured, ["runpod"]);
    expect(runpod).toEqual([
      { name: "runpod", type: "runpod", package: "@skyward/provider-runpod", settings: {} },
    ]);
    expect(() => selectProviderEntries(configured, ["azure"])).toThrow(
      'unknown provider "azure": expected one of "east", "west", "aws", "gcp", "hyperstack", "kubernetes", "novita", "runpod", "slurm", "ssh", "tensordock", "vastai", "verda"',
    );
  });
});

describe("describeError", () => {
  it("puts any error on one line", () => {
    expect(describeError(new Error("first\n  second"))).toBe("first second");
    expect(describeError("plain")).toBe("plain");
  });
});
