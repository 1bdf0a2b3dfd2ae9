/**
 * A provider's settings schema on the base, declared once: {@link machineSettingsShape}'s fields and
 * the provider's own in one strict object (an unknown key refused by name), typed by the named
 * {@link MachineSettingsObject} so that the published declarations keep each key's TSDoc.
 */
import { z } from "zod";
import { type MachineSettingsShape, machineSettingsShape } from "./machine-settings.js";

/** The strict settings object of a provider on the base: the base's fields, then `Shape`'s own. */
export type MachineSettingsObject<Seam, Shape extends z.core.$ZodShape> = z.ZodObject<
  MachineSettingsShape<Seam> & Shape,
  z.core.$strict
>;

/**
 * The settings object of a provider whose `sshAddress` test seam is `Seam`, `apiUrl` defaulting to
 * `defaultApiUrl`: `machineSettingsObject<AcmeSeam>()(url, { ...its own fields })`.
 */
export function machineSettingsObject<Seam>() {
  return <Shape extends z.core.$ZodShape>(
    defaultApiUrl: string,
    shape: Shape,
  ): MachineSettingsObject<Seam, Shape> =>
    z.strictObject({ ...machineSettingsShape<Seam>(defaultApiUrl), ...shape });
}
