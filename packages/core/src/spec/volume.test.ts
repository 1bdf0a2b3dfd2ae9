import { describe, expect, it } from "vitest";
import type { Provider } from "../contract/provider.js";
import { ConfigurationError } from "../errors/errors.js";
import { compute } from "../index.js";
import { checkVolumeSources, FORBIDDEN_MOUNTS, type VolumeStorageClient, volume } from "./volume.js";

describe("volume defaults", () => {
  it("fills in prefix, readOnly and storage", () => {
    expect(volume({ bucket: "my-data", mount: "/data" })).toEqual({
      bucket: "my-data",
      mount: "/data",
      prefix: "",
      readOnly: true,
      storage: undefined,
    });
  });

  it("keeps what is given", () => {
    const resolved = volume({
      bucket: "checkpoints.v2",
      mount: "/checkpoints",
      prefix: "runs/2024/",
      readOnly: false,
      storage: {
        endpoint: "https://s3.example.com",
        accessKeyEnv: "R2_ACCESS_KEY",
        secretKeyEnv: "R2_SECRET_KEY",
        pathStyle: true,
      },
    });
    expect(resolved).toEqual({
      bucket: "checkpoints.v2",
      mount: "/checkpoints",
      prefix: "runs/2024/",
      readOnly: false,
      storage: {
        endpoint: "https://s3.example.com",
        accessKeyEnv: "R2_ACCESS_KEY",
        secretKeyEnv: "R2_SECRET_KEY",
        pathStyle: true,
      },
    });
  });

  it("is frozen, storage included", () => {
    const resolved = volume({
      bucket: "data",
      mount: "/data",
      storage: { endpoint: "http://localhost:9000" },
    });
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(Object.isFrozen(resolved.storage)).toBe(true);
  });

  it("re-validates to the same volume", () => {
    const once = volume({ bucket: "data", mount: "/data/", prefix: "x/", readOnly: false });
    expect(volume(once)).toEqual(once);
  });
});

describe("mount paths", () => {
  it.each([
    ["/data/", "/data"],
    ["/data///", "/data"],
    ["/data//train/", "/data/train"],
    ["/data/./train", "/data/train"],
  ])("normalises %s to %s", (mount, expected) => {
    expect(volume({ bucket: "data", mount }).mount).toBe(expected);
  });

  it.each(["/data/x", "/mnt/datasets/imagenet", "/home/ubuntu/data", "/tmp/cache", "/opt/models"])(
    "accepts the nested or ordinary mount %s",
    (mount) => {
      expect(volume({ bucket: "data", mount }).mount).toBe(mount);
    },
  );

  it("lists the forbidden mount points of the reference", () => {
    expect(FORBIDDEN_MOUNTS).toEqual(expect.arrayContaining(["/", "/opt", "/opt/skyward", "/root", "/tmp"]));
    expect(Object.isFrozen(FORBIDDEN_MOUNTS)).toBe(true);
  });

  it("rejects a forbidden mount even when written with a trailing slash", () => {
    try {
      volume({ bucket: "data", mount: "/tmp/" });
      expect.unreachable("a forbidden mount was accepted");
    } catch (error) {
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as ConfigurationError).issues.map((issue) => issue.path)).toEqual(["volume.mount"]);
    }
  });
});

describe("checkVolumeSources", () => {
  const storage = { endpoint: "http://10.0.0.1:9000", accessKeyEnv: "SKYT_K", secretKeyEnv: "SKYT_S" };
  const paths = (make: () => void): string[] => {
    try {
      make();
    } catch (error) {
      expect(ConfigurationError.isInstance(error)).toBe(true);
      return (error as ConfigurationError).issues.map((issue) => issue.path);
    }
    return [];
  };

  it("accepts a store whose keys are set, and AWS's own store", () => {
    expect(
      paths(() =>
        checkVolumeSources("ssh", [volume({ bucket: "data", mount: "/data", storage })], "volumes", {
          SKYT_K: "a",
          SKYT_S: "b",
        }),
      ),
    ).toEqual([]);
    expect(
      paths(() => checkVolumeSources("aws", [volume({ bucket: "data", mount: "/data" })], "volumes", {})),
    ).toEqual([]);
    expect(paths(() => checkVolumeSources(undefined, [volume({ bucket: "data", mount: "/data" })]))).toEqual(
      [],
    );
  });

  it("refuses a volume without a store on a provider without one, and unset keys, naming the fields", () => {
    expect(
      paths(() => checkVolumeSources("runpod", [volume({ bucket: "data", mount: "/data" })], "volumes", {})),
    ).toEqual(["volumes[0].storage"]);
    expect(
      paths(() =>
        checkVolumeSources("ssh", [volume({ bucket: "data", mount: "/data", storage })], "specs[1].volumes", {
          SKYT_S: "b",
        }),
      ),
    ).toEqual(["specs[1].volumes[0].storage.accessKeyEnv"]);
    expect(
      paths(() =>
        checkVolumeSources(
          "ssh",
          [
            volume({
              bucket: "data",
              mount: "/data",
              storage: { endpoint: "http://x", secretKeyEnv: "SKYT_S" },
            }),
          ],
          "volumes",
          { SKYT_S: "b" },
        ),
      ),
    ).toEqual(["volumes[0].storage.accessKeyEnv"]);
  });
});

describe("a volume whose storage is a client", () => {
  const client = (
    keys: Awaited<ReturnType<VolumeStorageClient["resolveCredentials"]>>,
  ): VolumeStorageClient => ({
    endpoint: "https://objects.example.com",
    resolveCredentials: async () => keys,
  });
  // Every method records its call: a refused pool must reach none of them (nothing provisioned).
  const providerCalls: string[] = [];
  const provider = new Proxy(
    { specificationVersion: "v1", name: "ssh", capabilities: { spot: false }, selfDestruct: () => "true" },
    {
      get: (target, property) =>
        property in target
          ? target[property as keyof typeof target]
          : typeof property === "string" && property !== "then"
            ? async () => {
                providerCalls.push(property);
                throw new Error(`${property} must not be reached`);
              }
            : undefined,
    },
  ) as unknown as Provider;
  const refusal = (storage: VolumeStorageClient) =>
    compute({
      provider,
      volumes: [{ bucket: "data", mount: "/data", storage }],
      options: { console: false },
    }).then(
      () => undefined,
      (error: unknown) => error,
    );

  it("is refused before any machine starts when s3fs could not use its keys, naming the field", async () => {
    for (const keys of [
      // s3fs signs with a key pair only: temporary credentials (a session token) used to be found
      // out on each node, after its machine was paid for.
      { accessKey: "AKIA", secretKey: "s3cr3t-value", sessionToken: "token" },
      // No keys: only AWS's nodes have a role to sign with.
      undefined,
      { accessKey: "AK:IA", secretKey: "s3cr3t-value" },
    ]) {
      const failure = await refusal(client(keys));
      expect(ConfigurationError.isInstance(failure), String(failure)).toBe(true);
      expect((failure as ConfigurationError).issues.map((issue) => issue.path)).toEqual([
        "volumes[0].storage",
      ]);
      expect(String(failure)).not.toContain("s3cr3t-value");
    }
    expect(providerCalls).toEqual([]);
  });
});
