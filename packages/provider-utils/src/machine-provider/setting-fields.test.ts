import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  absolutePathField,
  millisecondsField,
  nonEmptyListField,
  textField,
  wholeNumberField,
} from "./setting-fields.js";

const messages = (schema: z.ZodType, value: unknown) => {
  const result = schema.safeParse(value);
  return result.success ? [] : result.error.issues.map((issue) => issue.message);
};

describe("setting fields", () => {
  it("a whole number refuses a fraction and a string with the same message", () => {
    const field = wholeNumberField("the disk size in GB");
    expect(field.parse(12)).toBe(12);
    expect(messages(field, 1.5)).toEqual(["expected the disk size in GB as a whole number"]);
    expect(messages(field, "12")).toEqual(["expected the disk size in GB as a whole number"]);
  });

  it("text refuses an empty string and a number", () => {
    const field = textField("a region name");
    expect(field.parse("EU")).toBe("EU");
    expect(messages(field, "")).toEqual(["expected a region name"]);
    expect(messages(field, 3)).toEqual(["expected a region name"]);
  });

  it("an absolute path refuses a relative one", () => {
    expect(absolutePathField().parse("/workspace")).toBe("/workspace");
    expect(messages(absolutePathField(), "workspace")).toEqual(["expected an absolute path"]);
  });

  it("a non-empty list refuses an empty one, and checks each item", () => {
    const field = nonEmptyListField(z.string().min(1), "CPU flavor");
    expect(field.parse(["cpu3c"])).toEqual(["cpu3c"]);
    expect(messages(field, [])).toEqual(["expected at least one CPU flavor"]);
    expect(messages(field, [""])).toHaveLength(1);
  });

  it("milliseconds refuse a negative number", () => {
    expect(millisecondsField().parse(0)).toBe(0);
    expect(messages(millisecondsField(), -1)).toEqual(["expected milliseconds >= 0"]);
  });
});
