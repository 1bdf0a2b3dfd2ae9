/**
 * The settings schema of a container marketplace (RunPod, Vast.ai), declared once: the HTTP settings,
 * {@link containerSettingsShape}, and the provider's own shape over them (its `apiKey` with the TSDoc
 * naming its variable), every other key refused by name. Its type is written out so that a provider's
 * published declarations keep each key's TSDoc (an inferred shape is printed without them).
 */
import { z } from "zod";
import { httpSettingsShape } from "../http/http-settings.js";
import { type ContainerSettingsShape, containerSettingsShape } from "./machine-settings.js";

/** The schema {@link containerSettingsSchema} makes of the provider's `Shape`. */
export type ContainerSettingsSchema<Shape extends z.core.$ZodShape> = z.ZodObject<
  Omit<typeof httpSettingsShape, keyof Shape> & Omit<ContainerSettingsShape, keyof Shape> & Shape,
  z.core.$strict
>;

/** The strict schema of the HTTP settings, the containers' ones and `shape`; see the module comment. */
export function containerSettingsSchema<Shape extends z.core.$ZodShape>(
  shape: Shape,
): ContainerSettingsSchema<Shape> {
  return z.strictObject({
    ...httpSettingsShape,
    ...containerSettingsShape,
    ...shape,
  }) as unknown as ContainerSettingsSchema<Shape>;
}
