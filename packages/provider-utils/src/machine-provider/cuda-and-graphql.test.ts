/**
 * The CUDA constraint a GPU host must meet (read from an image, compared as numbers), GraphQL calls
 * whose errors come as HTTP 200, and a 403 a provider classifies as "this account may not".
 */
import { containers } from "@skyward/core";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { cudaConstraint, cudaFits, cudaVersionField, imageCudaVersion } from "./cuda-constraint.js";
import { errorTable } from "./error-table.js";
import type { MachineProviderError } from "./errors.js";
import { graphqlCall } from "./graphql-call.js";
import { defineMachineApi } from "./machine-api.js";

const SECRET = "sk-graphql-secret-1234";

const exampleApi = defineMachineApi({
  provider: "example",
  errorName: "ExampleApiError",
  label: "Example",
  apiKeyVariable: "EXAMPLE_API_KEY",
  classify: errorTable([
    { status: [403], kind: "account" },
    { words: /out of stock/i, kind: "capacity" },
  ]),
});

/** A client whose every request is answered `status` with `body`. */
function answering(status: number, body: unknown) {
  const fetch = async () => Response.json(body, { status });
  const settings = { apiKey: SECRET, fetch, maxRetries: 0, retryDelayMs: 1, requestTimeoutMs: 5000 };
  return exampleApi.jsonClient({ ...settings, apiUrl: "https://api.example.com" });
}

const call = (status: number, body: unknown) =>
  graphqlCall(
    exampleApi,
    answering(status, body).http,
    "https://api.example.com/graphql",
    z.looseObject({ pods: z.array(z.string()) }),
    {
      query: "query { pods }",
      purpose: "listing pods",
      idempotent: true,
      signal: AbortSignal.timeout(5000),
    },
  );

describe("CUDA constraint", () => {
  it("reads the CUDA version an image's tag names", () => {
    expect(imageCudaVersion("runpod/base:1.0.3-cuda1290-ubuntu2204")).toBe("12.9");
    expect(imageCudaVersion("runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404")).toBe("12.8");
    expect(imageCudaVersion("nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04")).toBe("12.4");
    expect(imageCudaVersion("runpod/pytorch:2.1.0-py3.10-cuda11.8.0-devel-ubuntu22.04")).toBe("11.8");
    expect(imageCudaVersion("python:3.12-slim")).toBeUndefined();
  });

  it("compares versions as numbers, or against an exact list", () => {
    expect(cudaFits({ minCudaVersion: "12.9" }, "12.10")).toBe(true);
    expect(cudaFits({ minCudaVersion: "12.9" }, "12.8")).toBe(false);
    expect(cudaFits({ minCudaVersion: "12.9" }, "13.0")).toBe(true);
    expect(cudaFits({ allowedCudaVersions: ["12.8"] }, "12.9")).toBe(false);
    expect(cudaFits({}, "11.0")).toBe(true);
  });

  it("takes the list, else the minimum, else the image's CUDA (a DockerImage's before its tag)", () => {
    const image = "runpod/base:1.0.3-cuda1290-ubuntu2204";
    const base = { minimum: undefined, allowed: undefined, image, written: {}, key: "image" };
    expect(cudaConstraint(base)).toEqual({ minCudaVersion: "12.9" });
    expect(cudaConstraint({ ...base, minimum: "12.4" })).toEqual({ minCudaVersion: "12.4" });
    expect(cudaConstraint({ ...base, allowed: ["12.8"] })).toEqual({ allowedCudaVersions: ["12.8"] });
    const written = { image: containers.cuda("12.6") };
    expect(cudaConstraint({ ...base, written })).toEqual({ minCudaVersion: "12.6" });
    expect(cudaConstraint({ ...base, image: "python:3.12" })).toEqual({});
  });

  it("a CUDA version setting is major.minor, refused otherwise with an example", () => {
    expect(cudaVersionField().parse("12.10")).toBe("12.10");
    for (const bad of ["12", "12.8.1", "twelve", "v12.8"])
      expect(cudaVersionField().safeParse(bad).error?.issues[0]?.message).toBe(
        'expected a CUDA version like "12.8" (major.minor)',
      );
  });
});

describe("graphqlCall", () => {
  it("parses the answer's data", async () => {
    await expect(call(200, { data: { pods: ["a"] } })).resolves.toEqual({ pods: ["a"] });
  });

  it("rejects GraphQL errors of an HTTP 200 as the provider's error, classified by their words, the key scrubbed", async () => {
    const stock = await call(200, { errors: [{ message: `out of stock near ${SECRET}` }] }).catch((e) => e);
    expect(exampleApi.ApiError.isInstance(stock)).toBe(true);
    expect(stock.kind).toBe("capacity");
    expect(stock.message).toContain("Example's API refused listing pods: out of stock near [redacted]");
    const other = await call(200, { errors: [{ message: "invalid input" }] }).catch((e) => e);
    expect(other.kind).toBe("bad-request");
    const empty = await call(200, {}).catch((e) => e);
    expect(empty.message).toContain("the answer had no data");
  });

  it("reads an authentication error as a rejected key", async () => {
    const error = await call(200, { errors: [{ message: `API key ${SECRET} is unauthorized` }] }).catch(
      (e) => e,
    );
    expect(error.kind).toBe("auth");
    expect(error.statusCode).toBe(401);
    expect(error.message).toContain("set EXAMPLE_API_KEY to a valid key or pass apiKey");
    expect(error.message).not.toContain(SECRET);
  });

  it("rejects an answer whose data the schema does not know", async () => {
    const error = await call(200, { data: { pods: "none" } }).catch((e) => e);
    expect(error.kind).toBe("unknown-answer");
  });
});

describe("a 403 classified as account", () => {
  it("says the account may not, with the API's words, not that the key is bad", async () => {
    const client = answering(403, { detail: "this account cannot use the requested pool" });
    const error = await client
      .read("other", "/pods", z.looseObject({}), "listing pods", AbortSignal.timeout(5000))
      .catch((e: unknown) => e as MachineProviderError);
    expect(error.kind).toBe("account");
    expect(error.message).toContain(
      "Example refused this account (HTTP 403) while listing pods (GET /pods): this account cannot use the requested pool",
    );
    expect(error.message).not.toContain("set EXAMPLE_API_KEY");
  });
});
