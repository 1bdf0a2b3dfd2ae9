/**
 * The shared half of VM-API adapters (`defineApiVm`): the fields it fills in, the delete going to the
 * self-destruct's own path and forgetting the stand-in, the self-destruct being the installed command
 * (the stand-in's for a stand-in), and the boot script being the API's with the provider's key file.
 */
import type { Instance } from "@skyward/core/contract";
import { DEFAULT_NODE_ROOT } from "@skyward/ssh";
import { describe, expect, it } from "vitest";
import { SELF_DESTRUCT_COMMAND } from "./api-self-destruct.js";
import { type ApiVmDefinition, defineApiVm } from "./api-vm.js";
import { endpoint, machineEndpoints } from "./endpoints.js";
import { defineMachineApi } from "./machine-api.js";

const KEY = "sk_test_ApIvM0123456789";

const apiDefinition = {
  provider: "example",
  errorName: "ExampleApiError",
  label: "Example",
  apiKeyVariable: "SKYWARD_TEST_API_VM_KEY",
  classify: () => undefined,
};
const vmApi = defineMachineApi(apiDefinition);

const exampleDefinition = {
  api: vmApi,
  name: "example",
  label: "Example",
  capabilities: { spot: false, offerCache: "marketplace" },
  machineNoun: "server",
  selfDestruct: {
    header: "X-Key",
    idPattern: "[0-9]+",
    listPath: "/servers?name={name}",
    listItems: ["servers"],
    deletePath: "/servers/{id}",
    keyFile: "/etc/skyward/example-key",
  },
} satisfies ApiVmDefinition;
const exampleVm = defineApiVm(exampleDefinition);

/** A fetch answering 204 to everything, keeping each request's method and path. */
function recordingFetch() {
  const seen: string[] = [];
  const fetch = async (input: URL | Request | string, init?: RequestInit) => {
    const request = new Request(input, init);
    seen.push(`${request.method} ${new URL(request.url).pathname}`);
    return new Response(null, { status: 204 });
  };
  return { seen, fetch };
}

const settings = (extra: object = {}) => ({
  apiUrl: "http://api.example.test/v1",
  apiKey: KEY,
  sshUser: "ubuntu",
  maxRetries: 0,
  retryDelayMs: 1,
  requestTimeoutMs: 5000,
  ...extra,
});

const instance = (id: string, publicIp: string | null) => ({ id, publicIp }) as unknown as Instance;

describe("defineApiVm", () => {
  it("fills in the adapter's login, key pair and watchdog fields from the settings", () => {
    const { fields } = exampleVm.adapterBase(settings({ keysDirectory: "/keys" }), () => undefined);
    expect(fields).toMatchObject({
      name: "example",
      sshUser: "ubuntu",
      keyName: "example_ed25519",
      keysDirectory: "/keys",
      idempotencyToken: false,
      bootWatchdog: "boot-command",
      label: "Example",
      clusterIdPrefix: "skyward",
      capabilities: { spot: false, offerCache: "marketplace" },
    });
    expect(fields.idOf({ id: 42 })).toBe("42");
  });

  it("takes the provider's name and label from its API unless given", () => {
    const { name: _name, label: _label, ...unnamed } = exampleDefinition;
    const vm = defineApiVm({
      ...unnamed,
      api: defineMachineApi({ ...apiDefinition, label: "Example Cloud" }),
    });
    expect(vm.adapterBase(settings(), () => undefined).fields).toMatchObject({
      name: "example",
      label: "Example Cloud",
      keyName: "example_ed25519",
    });
  });

  it("checks the credentials without a request: a missing key names its variable", () => {
    const { fields } = exampleVm.adapterBase(settings({ apiKey: undefined }), () => undefined);
    delete process.env.SKYWARD_TEST_API_VM_KEY;
    expect(() => fields.checkCredentials()).toThrow(/SKYWARD_TEST_API_VM_KEY/);
  });

  it("deletes by the self-destruct's path, and the self-destruct runs the installed command through sudo", async () => {
    const { seen, fetch } = recordingFetch();
    const { fields } = exampleVm.adapterBase(settings({ fetch }), () => undefined);
    if (!("one" in fields.delete)) throw new Error("expected a one-by-one delete");
    await fields.delete.one("42", AbortSignal.timeout(5000));
    expect(seen).toEqual(["DELETE /v1/servers/42"]);
    const command = fields.selfDestruct(instance("42", "203.0.113.7"), undefined as never);
    expect(command).toBe(`sudo -n ${SELF_DESTRUCT_COMMAND} 42`);
  });

  it("a machine behind a stand-in host self-destructs as the stand-in says, until it is deleted", async () => {
    const { fetch } = recordingFetch();
    const sshAddress = (address: { ip: string }) => ({
      host: "10.9.0.2",
      port: 22,
      selfDestruct: `echo ${address.ip}`,
    });
    const { fields, standIns } = exampleVm.adapterBase(settings({ fetch, sshAddress }), (machine) =>
      machine.publicIp ? { ip: machine.publicIp } : undefined,
    );
    expect(standIns.of("7", { ip: "203.0.113.9" })?.host).toBe("10.9.0.2");
    expect(fields.selfDestruct(instance("7", "203.0.113.9"), undefined as never)).toBe("echo 203.0.113.9");
    if (!("one" in fields.delete)) throw new Error("expected a one-by-one delete");
    await fields.delete.one("7", AbortSignal.timeout(5000));
    expect(fields.selfDestruct(instance("7", null), undefined as never)).toBe("echo 203.0.113.9");
    // Forgotten once deleted (the base's delete calls `forget`): asked again (a detached pool's new
    // provider object), the seam answers anew.
    fields.forget?.("7");
    expect(fields.selfDestruct(instance("7", null), undefined as never)).toBe(
      `sudo -n ${SELF_DESTRUCT_COMMAND} 7`,
    );
  });

  it("maps the adapter's machines reached as the settings' login user, through the test seam", () => {
    const sshAddress = (address: { ip: string }) => ({
      host: "10.9.0.3",
      port: 2222,
      user: `as-${address.ip}`,
    });
    const mapping = {
      statuses: { running: ["up"] },
      deleting: [],
      tags: (): Record<string, string> => ({}),
      address: (machine: { id: number; status: string; ip: string }) => ({ host: machine.ip, port: 22 }),
      seamAddress: (_id: string, { host }: { host: string }) => ({ ip: host }),
    };
    const machine = { id: 5, status: "up", ip: "203.0.113.5" };
    const none = (): { ip: string } | undefined => undefined;
    const plain = exampleVm.adapterBase(settings(), none).mapped(mapping);
    expect(plain.describe(machine, { identityFile: "/k" }).ssh).toMatchObject({
      host: "203.0.113.5",
      port: 22,
      user: "ubuntu",
    });
    const seamed = exampleVm.adapterBase(settings({ sshAddress }), none).mapped(mapping);
    expect(seamed.describe(machine, { identityFile: "/k" }).ssh).toMatchObject({
      host: "10.9.0.3",
      port: 2222,
      user: "as-203.0.113.5",
    });
  });

  it("binds the declared endpoints to the adapter's client", async () => {
    const { seen, fetch } = recordingFetch();
    const withCalls = defineApiVm({
      ...exampleDefinition,
      endpoints: machineEndpoints(vmApi, {
        stop: endpoint("POST /servers/{id}/stop", undefined, "stopping {id}"),
      }),
    });
    await withCalls
      .adapterBase(settings({ fetch }), () => undefined)
      .calls.stop({ id: 7 }, AbortSignal.timeout(5000));
    expect(seen).toEqual(["POST /v1/servers/7/stop"]);
    expect(exampleVm.adapterBase(settings(), () => undefined).calls).toBeUndefined();
  });

  it("the boot script is the API's, with the provider's key file, the node root and the VM's name", () => {
    const { bootScript } = exampleVm.adapterBase(settings(), () => undefined);
    const script = bootScript("skyward-1a2b3c4d-0", 600);
    expect(script).toContain("/etc/skyward/example-key");
    expect(script).toBe(
      exampleVm.renderBootScript({
        apiUrl: "http://api.example.test/v1",
        apiKey: KEY,
        vmName: "skyward-1a2b3c4d-0",
        root: DEFAULT_NODE_ROOT,
        watchdogSeconds: 600,
      }),
    );
  });
});
