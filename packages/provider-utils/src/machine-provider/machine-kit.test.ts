/**
 * The pieces providers on the machine-provider base share: the API definition (error class, typed JSON
 * client), status tables, tag words, the described instance, the `sshAddress` seam and the settings.
 */
import { ConfigurationError } from "@skyward/core";
import type { Instance } from "@skyward/core/contract";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { MachineProviderError } from "./errors.js";
import { defineMachineApi } from "./machine-api.js";
import {
  describeMachine,
  selfDestructCommand,
  standInSeam,
  statusTable,
  tagsFromWords,
  tagsToWords,
} from "./machine-instance.js";
import {
  containerSettingsShape,
  machineProviderFactories,
  machineSettingsShape,
  refuseSetting,
  sshUserSchema,
} from "./machine-settings.js";

const KEY = "sk_test_MaChInE0123456789";

const exampleApi = defineMachineApi({
  provider: "example",
  errorName: "ExampleApiError",
  label: "Example",
  apiKeyVariable: "SKYWARD_TEST_MACHINE_KIT_KEY",
  classify: ({ message }) => (/sold out/i.test(message) ? "capacity" : undefined),
});

/** A fetch answering each request with `answer`, keeping what it was asked. */
function answering(answer: (request: Request) => Response) {
  const seen: Request[] = [];
  const fetch = async (input: URL | Request | string, init?: RequestInit) => {
    const request = new Request(input, init);
    seen.push(request);
    return answer(request);
  };
  const client = exampleApi.jsonClient({
    apiUrl: "https://api.example.com/v1/",
    apiKey: KEY,
    fetch,
    maxRetries: 0,
    retryDelayMs: 1,
    requestTimeoutMs: 5000,
  });
  return { seen, client };
}

describe("defineMachineApi", () => {
  it("reads and posts JSON under the API root, parsed with the schema, the key as a bearer token", async () => {
    const { seen, client } = answering(() => Response.json({ machines: [{ id: "m-1" }] }));
    const schema = z.object({ machines: z.array(z.object({ id: z.string() })) });
    const listed = await client.read(
      "list",
      "/machines",
      schema,
      "listing machines",
      AbortSignal.timeout(5000),
      {
        page: "2",
      },
    );
    expect(listed.machines).toEqual([{ id: "m-1" }]);
    await client.call("create", "POST", "/machines", schema, "creating", AbortSignal.timeout(5000), {
      data: { name: "a" },
    });
    expect(seen.map((request) => `${request.method} ${request.url}`)).toEqual([
      "GET https://api.example.com/v1/machines?page=2",
      "POST https://api.example.com/v1/machines",
    ]);
    expect(await seen[1]?.json()).toEqual({ name: "a" });
    expect(seen[0]?.headers.get("authorization")).toBe(`Bearer ${KEY}`);
  });

  it("fails with the provider's own error class, classified, and an unknown answer is never read as empty", async () => {
    const soldOut = answering(() => Response.json({ message: "GPU sold out" }, { status: 400 }));
    const error = await soldOut.client
      .remove("delete", "/machines/m-1", "deleting machine m-1", AbortSignal.timeout(5000))
      .catch((failure: unknown) => failure);
    expect(exampleApi.ApiError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ name: "ExampleApiError", provider: "example", kind: "capacity" });
    const unknown = answering(() => Response.json({ data: [] }));
    const schema = z.object({ machines: z.array(z.unknown()) });
    await expect(
      unknown.client.read("list", "/machines", schema, "listing machines", AbortSignal.timeout(5000)),
    ).rejects.toMatchObject({ kind: "unknown-answer" });
    // Another provider's error is not this one's.
    const other = new MachineProviderError({ provider: "other", kind: "gone", message: "gone" });
    expect(exampleApi.ApiError.isInstance(other)).toBe(false);
    expect(new exampleApi.ApiError({ message: "refused" }).kind).toBe("bad-request");
  });

  it("names the provider and its error class after the label unless told otherwise", () => {
    const named = defineMachineApi({
      label: "Acme",
      apiKeyVariable: "ACME_API_KEY",
      classify: () => undefined,
    });
    expect(new named.ApiError({ message: "refused" })).toMatchObject({
      name: "AcmeApiError",
      provider: "acme",
    });
    expect(named.ApiError.isInstance(new exampleApi.ApiError({ message: "refused" }))).toBe(false);
  });

  it("typed calls go through the wrapped send, naming their endpoint; PUT and DELETE repeat, POST does not", async () => {
    const seen: { url: string; endpoint: string | undefined; idempotent: boolean }[] = [];
    const client = exampleApi.jsonClient(
      {
        apiUrl: "https://api.example.com/v1",
        apiKey: KEY,
        fetch: async () => Response.json({ machines: [] }),
        maxRetries: 0,
        retryDelayMs: 1,
        requestTimeoutMs: 5000,
      },
      {
        rateLimits: { endpoints: { list: { requests: 1, perSeconds: 1, source: "https://example.com" } } },
        send: (paced) => (request, endpoint) => {
          seen.push({ url: request.url, endpoint, idempotent: request.idempotent });
          return paced(request, endpoint);
        },
      },
    );
    const schema = z.object({ machines: z.array(z.unknown()) });
    const signal = AbortSignal.timeout(5000);
    const listed = await client.json("GET", "/machines", {
      schema,
      endpoint: "list",
      purpose: "listing",
      signal,
    });
    expect(listed.machines).toEqual([]);
    await client.call("other", "PUT", "/machines/m-1", schema, "renaming", signal);
    await client.call("create", "POST", "/machines", schema, "creating", signal);
    await client.remove("delete", "/machines/m-1", "deleting", signal);
    expect(seen).toEqual([
      { url: "https://api.example.com/v1/machines", endpoint: "list", idempotent: true },
      { url: "https://api.example.com/v1/machines/m-1", endpoint: "other", idempotent: true },
      { url: "https://api.example.com/v1/machines", endpoint: "create", idempotent: false },
      { url: "https://api.example.com/v1/machines/m-1", endpoint: "delete", idempotent: true },
    ]);
  });
});

describe("machine instances", () => {
  it("a status table maps the API's words without case, the rest to pending", () => {
    const statusOf = statusTable({ running: ["ACTIVE"], terminated: ["deleted", "StoppedDisassociated"] });
    expect(["active", "DELETED", "stoppeddisassociated", "building"].map(statusOf)).toEqual([
      "running",
      "terminated",
      "terminated",
      "pending",
    ]);
  });

  it("tags travel as key=value words; words not Skyward's are left out", () => {
    const words = tagsToWords({ "skyward:cluster": "skyward-1a2b3c4d", "skyward:pool": "a=b" });
    expect(words).toEqual(["skyward:cluster=skyward-1a2b3c4d", "skyward:pool=a=b"]);
    expect(tagsFromWords([...words, "team=ml", "=x", "skyward"])).toEqual({
      "skyward:cluster": "skyward-1a2b3c4d",
      "skyward:pool": "a=b",
    });
  });

  it("a machine is running only with an SSH address; a stand-in replaces it, the offer comes from its tags", () => {
    const base = {
      id: "m-1",
      identityFile: "/keys/id",
      spot: false,
      hourlyPrice: 1.5,
      tags: { "skyward:offer": "example:a100" },
    };
    const booting = describeMachine({ ...base, status: "running", address: null, createdAt: "not a date" });
    expect(booting).toMatchObject({ status: "pending", ssh: null, publicIp: null, offerId: "example:a100" });
    expect(Number.isFinite(booting.createdAt)).toBe(true);
    const address = { host: "203.0.113.5", port: 22, user: "ubuntu" };
    const running = describeMachine({
      ...base,
      status: "running",
      address,
      createdAt: "2026-01-02T00:00:00Z",
    });
    expect(running).toMatchObject({ status: "running", publicIp: "203.0.113.5", privateIp: "203.0.113.5" });
    expect(running.ssh).toMatchObject({
      host: "203.0.113.5",
      port: 22,
      user: "ubuntu",
      identityFile: "/keys/id",
    });
    expect(running.createdAt).toBe(Date.parse("2026-01-02T00:00:00Z"));
    const standIn = { host: "10.9.0.2", port: 2222 };
    const replaced = describeMachine({ ...base, status: "running", address, standIn });
    expect(replaced).toMatchObject({ publicIp: "203.0.113.5", privateIp: "10.9.0.2" });
    expect(replaced.ssh).toMatchObject({ host: "10.9.0.2", port: 2222 });
  });

  it("the sshAddress seam is asked once per machine, and a stand-in host is never deleted", () => {
    const asked: string[] = [];
    const seam = standInSeam(
      (address: { id: string; ip: string }) => {
        asked.push(address.id);
        return { host: "10.9.0.2", port: 22, selfDestruct: "touch /tmp/released" };
      },
      (instance: Instance) => (instance.publicIp ? { id: instance.id, ip: instance.publicIp } : undefined),
    );
    expect(seam.of("m-1", { id: "m-1", ip: "203.0.113.5" })).toMatchObject({ host: "10.9.0.2" });
    seam.of("m-1", { id: "m-1", ip: "203.0.113.5" });
    expect(asked).toEqual(["m-1"]);
    const command = selfDestructCommand("/usr/local/sbin/skyward-self-destruct", "m 2", "ubuntu");
    expect(command).toBe("sudo -n /usr/local/sbin/skyward-self-destruct 'm 2'");
    const instance = { id: "m-2", publicIp: "203.0.113.6" } as Instance;
    // A machine this object never described (an attached pool): the seam is asked from its Instance.
    expect(seam.selfDestruct(instance, command)).toBe("touch /tmp/released");
    const without = standInSeam(undefined, () => undefined);
    expect(without.selfDestruct(instance, command)).toBe(command);
    expect(selfDestructCommand("/bin/end", "m-3", "root")).toBe("/bin/end m-3");
  });
});

describe("machine settings", () => {
  const schema = z.strictObject({
    ...machineSettingsShape<() => { host: string; port: number }>("https://api.example.com/v1"),
    sshUser: sshUserSchema("ubuntu"),
  });

  it("fills the defaults and drops a trailing slash from the API root", () => {
    expect(schema.parse({ apiUrl: "https://example.test/api//" })).toMatchObject({
      apiUrl: "https://example.test/api",
      sshUser: "ubuntu",
      maxRetries: 4,
    });
    expect(schema.parse({}).apiUrl).toBe("https://api.example.com/v1");
  });

  it("the provider's factories refuse a bad field by name, before any adapter is made", () => {
    const factories = machineProviderFactories<Record<string, unknown>>()("Example", schema, () => {
      throw new Error("no adapter for bad settings");
    });
    const refusal = (settings: Record<string, unknown>) => {
      try {
        factories.provider(settings);
      } catch (error) {
        return error;
      }
      return undefined;
    };
    for (const [settings, path] of [
      [{ sshAddress: "10.0.0.1" }, "Example.sshAddress"],
      [{ sshUser: "Root!" }, "Example.sshUser"],
    ] as const) {
      const error = refusal(settings);
      expect(error).toBeInstanceOf(ConfigurationError);
      expect((error as ConfigurationError).issues.map((issue) => issue.path)).toContain(path);
    }
    expect(() => factories.fromConfig({ region: "x" })).toThrow(ConfigurationError);
  });

  it("container settings: no extra environment by default, each variable a string, the keys directory as given", () => {
    const containers = z.strictObject(containerSettingsShape);
    expect(containers.parse({})).toEqual({ env: {} });
    expect(containers.parse({ env: { HF_HOME: "/data" }, keysDirectory: "/keys" })).toEqual({
      env: { HF_HOME: "/data" },
      keysDirectory: "/keys",
    });
    const refused = containers.safeParse({ env: { RETRIES: 3 } });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(["env", "RETRIES"]);
  });

  it("a refused setting is a ConfigurationError naming its path and saying why", () => {
    const error = (() => {
      try {
        refuseSetting("volumeGb", "CPU pods take no volume");
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as ConfigurationError).issues).toEqual([
      { path: "volumeGb", message: "CPU pods take no volume" },
    ]);
  });
});
