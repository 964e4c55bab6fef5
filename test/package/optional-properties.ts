/**
 * What a TypeScript project compiled with `exactOptionalPropertyTypes` can write of the package: an optional property
 * declared `x?: T` takes no `undefined` there (`{ signal: maybeSignal }` is refused, TS2379), while the library takes
 * `undefined` as the property left out wherever it reads one. This walks the package's declarations as a consumer
 * reaches them, from its entry points in package.json `exports`, and lists each optional property a consumer writes
 * that does not take `undefined`: those of every type an entry point exports by name, and of every value its functions,
 * classes' constructors and methods take (their options, the objects inside them, the elements of an array, and what
 * a callback the consumer passes returns, such as a `ModelAdapter`'s `ModelResponse`).
 */
import { readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import ts from 'typescript';

/** `file:line name (how a consumer reaches it)` for each optional property of the package that refuses `undefined`. */
export function optionalsRefusingUndefined(packageDir: string): string[] {
  const pkg = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { types?: string }>;
  };
  const entries = Object.entries(pkg.exports).flatMap(([entry, target]) =>
    typeof target === 'object' && target.types ? [{ entry, types: join(packageDir, target.types) }] : [],
  );
  const program = ts.createProgram(
    entries.map((e) => e.types),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      exactOptionalPropertyTypes: true,
      types: [],
      noEmit: true,
    },
  );
  const checker = program.getTypeChecker();
  const ours = (d: ts.Node) => {
    const file = relative(packageDir, d.getSourceFile().fileName);
    return !file.startsWith('..') && !file.split(sep).includes('node_modules');
  };
  const hidden = (d: ts.Declaration | undefined) =>
    d !== undefined && (ts.getCombinedModifierFlags(d) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) !== 0;
  const takesUndefined = (t: ts.Type): boolean =>
    (t.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown | ts.TypeFlags.Undefined | ts.TypeFlags.Never)) !== 0 ||
    (t.isUnion() && t.types.some(takesUndefined));
  const found = new Map<string, string>();
  const seen = new Set<ts.Type>();

  /** A value the consumer writes, reached by `via`. */
  function written(t: ts.Type, via: string, depth: number): void {
    if (depth > 8 || seen.has(t)) return;
    seen.add(t);
    if (t.isUnion() || t.isIntersection()) return t.types.forEach((m) => written(m, via, depth));
    // An array's elements, a Map's entries, a Partial's or a Promise's type: written as well.
    for (const arg of t.aliasTypeArguments ?? []) written(arg, `${via}<>`, depth + 1);
    if (t.flags & ts.TypeFlags.Object && (t as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference)
      for (const arg of checker.getTypeArguments(t as ts.TypeReference)) written(arg, `${via}[]`, depth + 1);
    const symbol = t.getSymbol();
    if (!symbol?.declarations?.some(ours)) return; // another package's type, or a primitive
    if (symbol.flags & ts.SymbolFlags.Class) return; // an instance the library makes
    for (const sig of t.getCallSignatures()) {
      // A callback the consumer passes: what it returns (awaited) the consumer writes.
      const returned = sig.getReturnType();
      written(checker.getAwaitedType(returned) ?? returned, `${via}()`, depth + 1);
    }
    for (const property of t.getProperties()) {
      const d = property.declarations?.[0];
      if (!d || !ours(d) || hidden(d)) continue;
      const name = `${via}.${property.name}`;
      if (
        property.flags & ts.SymbolFlags.Optional &&
        (ts.isPropertySignature(d) || ts.isPropertyDeclaration(d)) &&
        d.type &&
        !takesUndefined(checker.getTypeFromTypeNode(d.type))
      ) {
        const line = d.getSourceFile().getLineAndCharacterOfPosition(d.getStart()).line + 1;
        const file = relative(packageDir, d.getSourceFile().fileName).split(sep).join('/');
        found.set(`${file}:${line} ${property.name}`, name);
      }
      written(checker.getTypeOfSymbol(property), name, depth + 1);
    }
  }
  /** Each argument of a function, constructor or method. */
  function takes(t: ts.Type, via: string): void {
    for (const sig of [...t.getCallSignatures(), ...t.getConstructSignatures()])
      for (const parameter of sig.getParameters())
        written(checker.getTypeOfSymbol(parameter), `${via}(${parameter.name})`, 0);
  }

  const done = new Set<ts.Symbol>();
  for (const { entry, types } of entries) {
    const module = checker.getSymbolAtLocation(program.getSourceFile(types)!)!;
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (done.has(symbol)) continue;
      done.add(symbol);
      const name = `${entry === '.' ? '' : entry.slice(2) + ':'}${exported.name}`;
      if (symbol.flags & ts.SymbolFlags.Value) {
        const type = checker.getTypeOfSymbol(symbol);
        takes(type, name);
        for (const p of type.getProperties())
          if (!hidden(p.declarations?.[0])) takes(checker.getTypeOfSymbol(p), `${name}.${p.name}`);
      }
      if (symbol.flags & ts.SymbolFlags.Class)
        for (const p of checker.getDeclaredTypeOfSymbol(symbol).getProperties())
          if (!hidden(p.declarations?.[0])) takes(checker.getTypeOfSymbol(p), `${name}#${p.name}`);
      if (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias))
        written(checker.getDeclaredTypeOfSymbol(symbol), name, 0);
    }
  }
  return [...found].map(([where, via]) => `${where} (${via})`).sort();
}
