import { ConfigurationError, volume } from "@skyward/core";
import { describe, expect, it } from "vitest";
import {
  renderVolumesScript,
  resolveVolumeMounts,
  unmountVolumesCommand,
  volumePasswdFiles,
} from "./volumes.js";

const storage = { endpoint: "http://10.0.0.1:9000/", accessKeyEnv: "K", secretKeyEnv: "S", pathStyle: true };
const env = { K: "EXAMPLEACCESSKEY", S: "secret/with$chars" };
const base = { provider: "ssh", region: "local", root: "/opt/skyward", env };

async function issuePath(make: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await make();
  } catch (error) {
    expect(ConfigurationError.isInstance(error)).toBe(true);
    return (error as ConfigurationError).issues[0]?.path;
  }
  throw new Error("expected a ConfigurationError");
}

/** A client shaped as @skyward/storage's Storage, keys from functions. */
function client(keys: { accessKey: string; secretKey: string; sessionToken?: string } | undefined) {
  return {
    endpoint: "https://s3.eu-central-1.wasabisys.com",
    region: "eu-central-1",
    pathStyle: false,
    resolveCredentials: async () => keys,
  };
}

describe("resolveVolumeMounts", () => {
  it("reads the keys from the client's environment into passwd files only", async () => {
    const mounts = await resolveVolumeMounts(
      [volume({ bucket: "data", mount: "/data", prefix: "v1/", storage })],
      base,
    );
    expect(mounts[0]).toMatchObject({
      url: "http://10.0.0.1:9000",
      pathStyle: true,
      passwd: "EXAMPLEACCESSKEY:secret/with$chars",
    });
    expect(volumePasswdFiles(mounts)).toEqual([
      { target: "volumes/0.passwd", content: "EXAMPLEACCESSKEY:secret/with$chars\n", mode: 0o600 },
    ]);
    const script = renderVolumesScript(mounts, "/opt/skyward", false);
    expect(script).not.toContain("secret/with");
    expect(script).not.toContain("EXAMPLEACCESSKEY");
    expect(script).toMatch(/skyward_mount 0 '?data:\/v1'? '?\/data'? /);
    expect(script).toContain(
      "url=http://10.0.0.1:9000,use_path_request_style,ro,passwd_file=/opt/skyward/volumes/0.passwd,mp_umask=022",
    );
  });

  it("mounts writable volumes without ro, and with the worker's uid under sudo", async () => {
    const mounts = await resolveVolumeMounts(
      [volume({ bucket: "ckpt", mount: "/ckpt", readOnly: false, storage })],
      base,
    );
    const script = renderVolumesScript(mounts, "/opt/skyward", true);
    expect(script).toContain(
      "url=http://10.0.0.1:9000,use_path_request_style,passwd_file=/opt/skyward/volumes/0.passwd,allow_other,mp_umask=022",
    );
    expect(script).toContain('",uid=$(id -u),gid=$(id -g)"');
  });

  it("takes a storage client's keys (resolved now) and region", async () => {
    const mounts = await resolveVolumeMounts(
      [volume({ bucket: "data", mount: "/data", storage: client({ accessKey: "AK", secretKey: "SK" }) })],
      base,
    );
    expect(volumePasswdFiles(mounts)[0]?.content).toBe("AK:SK\n");
    const script = renderVolumesScript(mounts, "/opt/skyward", false);
    expect(script).toContain(
      "url=https://s3.eu-central-1.wasabisys.com,endpoint=eu-central-1,ro,passwd_file=",
    );
    expect(script).not.toContain("AK:SK");
    expect(
      await issuePath(() =>
        resolveVolumeMounts(
          [
            volume({
              bucket: "data",
              mount: "/data",
              storage: client({ accessKey: "A", secretKey: "S", sessionToken: "T" }),
            }),
          ],
          base,
        ),
      ),
    ).toBe("volumes[0].storage");
    expect(
      await issuePath(() =>
        resolveVolumeMounts([volume({ bucket: "data", mount: "/data", storage: client(undefined) })], base),
      ),
    ).toBe("volumes[0].storage");
  });

  it("uses the instance role on AWS when a volume names no store", async () => {
    const mounts = await resolveVolumeMounts([volume({ bucket: "data", mount: "/data" })], {
      ...base,
      provider: "aws",
      region: "eu-west-1",
    });
    expect(mounts[0]).toMatchObject({ url: "https://s3.eu-west-1.amazonaws.com", passwd: undefined });
    const script = renderVolumesScript(mounts, "/opt/skyward", false);
    // The role's name is asked for on the node with an IMDSv2 token, then given to s3fs.
    expect(script).toContain('",iam_role=$SKYWARD_IAM_ROLE"');
    expect(script).toContain("X-aws-ec2-metadata-token-ttl-seconds");
    expect(script).not.toContain("iam_role=auto");
    expect(script).toContain("endpoint=eu-west-1");
    expect(volumePasswdFiles(mounts)).toEqual([]);
  });

  it("refuses what cannot be mounted, naming the field", async () => {
    expect(
      await issuePath(() => resolveVolumeMounts([volume({ bucket: "data", mount: "/data" })], base)),
    ).toBe("volumes[0].storage");
    expect(
      await issuePath(() =>
        resolveVolumeMounts([volume({ bucket: "data", mount: "/data", storage })], {
          ...base,
          env: { S: "x" },
        }),
      ),
    ).toBe("volumes[0].storage.accessKeyEnv");
    expect(
      await issuePath(() =>
        resolveVolumeMounts([volume({ bucket: "data", mount: "/home/me/.skyward/data", storage })], {
          ...base,
          root: "/home/me/.skyward",
        }),
      ),
    ).toBe("volumes[0].mount");
  });

  it("unmounts only what is mounted, lazily", () => {
    expect(unmountVolumesCommand([], false)).toBe(":");
    expect(unmountVolumesCommand(["/data", "/my ckpt"], false)).toMatch(
      /for m in '?\/data'? '\/my ckpt'; do/,
    );
  });
});
