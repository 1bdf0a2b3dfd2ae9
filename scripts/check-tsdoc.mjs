// Fails when an export of a package's public entry points has no TSDoc comment.
// Usage: node scripts/check-tsdoc.mjs [entry.ts…]   (default: every packages/*/src/{index,contract,config,logs}.ts)
import { globSync } from "node:fs";
import ts from "typescript";

const entries =
  process.argv.length > 2
    ? process.argv.slice(2)
    : globSync("packages/*/src/{index,contract,config,logs,protocol}.ts");
const program = ts.createProgram(entries, {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2023,
  strict: true,
  skipLibCheck: true,
  noEmit: true,
  customConditions: ["@skyward/source"],
});
const checker = program.getTypeChecker();
const missing = [];
let checked = 0;
for (const entry of entries) {
  const source = program.getSourceFile(entry);
  if (!source) throw new Error(`cannot read ${entry}`);
  const moduleSymbol = checker.getSymbolAtLocation(source);
  if (!moduleSymbol) continue;
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    checked += 1;
    const documented = (symbol.declarations ?? []).some((declaration) => {
      const node = ts.isVariableDeclaration(declaration) ? declaration.parent.parent : declaration;
      return ts.getJSDocCommentsAndTags(node).length > 0;
    });
    if (!documented) {
      const declaration = symbol.declarations?.[0];
      const where = declaration
        ? `${declaration.getSourceFile().fileName}:${declaration.getSourceFile().getLineAndCharacterOfPosition(declaration.getStart()).line + 1}`
        : "?";
      missing.push(`${entry}: ${exported.getName()} (${where})`);
    }
  }
}
if (missing.length > 0) {
  console.error(`Exports without TSDoc (${missing.length}):\n  ${missing.join("\n  ")}`);
  process.exit(1);
}
console.log(`TSDoc: all ${checked} exports of ${entries.length} entry points are documented.`);
