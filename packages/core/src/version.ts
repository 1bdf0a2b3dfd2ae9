/** This package's version; part of an image's {@link contentHash}. */
export const version = "0.1.0";
