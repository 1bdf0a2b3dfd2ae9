/**
 * A plugin's `secrets` hook: what `collectPluginSecrets` makes of it (validated as a spec's
 * `secrets`, refused without quoting what the hook returned), and that the builder and
 * `normalizePlugin` keep it. That a pool reads, sends and masks them is `test/secrets.test.ts`'s.
 */
import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/errors.js";
import { collectPluginSecrets, normalizePlugin, Plugin, PluginError, whyNotPlugin } from "./plugin.js";
import type { PluginV1 } from "./types.js";

const VALUE = "plugin-secret-value-3391";

describe("a plugin's secrets", () => {
  it("are collected in plugin order, validated into sources, a later plugin's replacing an earlier one's", () => {
    const first = Plugin.create("first").withSecrets(() => ({ TOKEN: VALUE, SHARED: { env: "FIRST" } }));
    const second = Plugin.create("second").withSecrets(() => ({ SHARED: { file: "~/shared" } }));
    expect(collectPluginSecrets([first, Plugin.create("none"), second])).toEqual({
      TOKEN: { value: VALUE },
      SHARED: { file: "~/shared" },
    });
    expect(collectPluginSecrets([])).toEqual({});
  });

  it("are called each time they are collected (a pool start), not when the plugin is made", () => {
    let calls = 0;
    const plugin = Plugin.create("counted").withSecrets(() => {
      calls += 1;
      return {};
    });
    expect(calls).toBe(0);
    collectPluginSecrets([plugin]);
    collectPluginSecrets([plugin]);
    expect(calls).toBe(2);
  });

  it("refuse a hook's bad return as the plugin's error, naming the entry and never quoting a value", () => {
    const messageOf = (secrets: unknown): string => {
      const bad = Plugin.create("bad").withSecrets(() => secrets as never);
      try {
        collectPluginSecrets([bad]);
      } catch (error) {
        expect(PluginError.isInstance(error)).toBe(true);
        return (error as Error).message;
      }
      throw new Error("expected the secrets to be refused");
    };
    const names = messageOf({ "1NAME": VALUE, SKYWARD_X: VALUE });
    expect(names).toMatch(/^plugin "bad": secrets hook returned no usable secrets/);
    expect(names).toMatch(/1NAME: expected an environment variable name/);
    expect(names).toMatch(/SKYWARD_X: SKYWARD_\* names are the runtime's own/);
    expect(names).not.toContain(VALUE);
    const source = messageOf({ OK: { env: VALUE, value: VALUE } });
    expect(source).toMatch(/OK: expected a string, \{ env: "NAME" \}/);
    expect(source).not.toContain(VALUE);
    const thrower = Plugin.create("thrower").withSecrets(() => {
      throw new Error("no keyring");
    });
    expect(() => collectPluginSecrets([thrower])).toThrow(/no keyring/);
    expect(() => collectPluginSecrets([Plugin.create("list").withSecrets(() => [] as never)])).toThrow(
      /plugin "list": secrets hook returned no usable secrets \(expected a table of secret names\)/,
    );
  });

  it("is a hook the builder, the contract's check and normalizePlugin keep", () => {
    const hook = () => ({ TOKEN: { env: "TOKEN" } });
    expect(Plugin.create("p").withSecrets(hook).secrets).toBe(hook);
    expect(() => Plugin.create("p").withSecrets("TOKEN" as never)).toThrow(ConfigurationError);
    const plain: PluginV1 = { specificationVersion: "v1", name: "plain", secrets: hook };
    expect(normalizePlugin(plain).secrets).toBe(hook);
    expect(whyNotPlugin({ specificationVersion: "v1", name: "p", secrets: { TOKEN: "x" } })).toBe(
      'plugin "p" has a secrets hook that is not a function',
    );
  });
});
