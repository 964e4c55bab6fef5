/**
 * What an SDK's type declarations say, read at run time with the TypeScript compiler: the `type` of each member of a
 * union (`ResponseOutputItem`), members declared in a namespace or through `extends` included, and the fields of an
 * interface. The declarations are those of the SDK installed in the repository (resolved with Node's resolver, not the
 * test's; where none sit beside its code, with the compiler's), so a member or field the SDK adds when it is updated fails the test that holds its table to them until it
 * is read on purpose.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import ts from 'typescript';

/** The compiler's reading of each declarations file, read once. */
const programs = new Map<string, ts.Program>();

/** The type or interface `name` exported by the declarations beside the module `specifier`, and a checker for it. */
function declared(specifier: string, name: string): { checker: ts.TypeChecker; type: ts.Type; where: string } {
  const resolved = createRequire(import.meta.url).resolve(specifier);
  let file = resolved.replace(/\.(c|m)?js$/, '.d.$1ts');
  // An SDK whose declarations are not beside its code (@google/genai's dist/node/node.d.ts): where the compiler
  // finds them for the same module, through the package's exports.
  if (!existsSync(file)) {
    const found = ts.resolveModuleName(
      specifier,
      resolved,
      { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext },
      ts.sys,
    ).resolvedModule?.resolvedFileName;
    if (!found) throw new Error(`no declarations for ${specifier} (beside ${resolved})`);
    file = found;
  }
  let program = programs.get(file);
  if (!program) {
    program = ts.createProgram([file], { noEmit: true, skipLibCheck: true, strictNullChecks: true, types: [] });
    programs.set(file, program);
  }
  const source = program.getSourceFile(file);
  if (!source) throw new Error(`no declarations at ${file}`);
  const checker = program.getTypeChecker();
  let node: ts.TypeAliasDeclaration | ts.InterfaceDeclaration | undefined;
  source.forEachChild((n) => {
    if ((ts.isTypeAliasDeclaration(n) || ts.isInterfaceDeclaration(n)) && n.name.text === name) node = n;
  });
  if (!node) throw new Error(`no type ${name} in ${file}`);
  return { checker, type: checker.getTypeAtLocation(node.name), where: `${name} in ${file}` };
}

/** The `type` literal of each member of a union (or of the one type there is). */
function tagsOf(checker: ts.TypeChecker, type: ts.Type, where: string): string[] {
  return (type.isUnion() ? type.types : [type]).map((member) => {
    const tag = member.getProperty('type');
    const tagType = tag ? checker.getTypeOfSymbol(tag) : undefined;
    if (!tagType?.isStringLiteral())
      throw new Error(`a member of ${where} without a literal type: ${checker.typeToString(member)}`);
    return tagType.value;
  });
}

/** The `type` literal of each member of the exported union `union` in the declarations beside the module `specifier`. */
export function unionTags(specifier: string, union: string): string[] {
  const { checker, type, where } = declared(specifier, union);
  if (!type.isUnion()) throw new Error(`${where} is not a union`);
  return tagsOf(checker, type, where);
}

/** The names of the fields of the exported interface `name`, beside the module `specifier`. */
export function fieldNames(specifier: string, name: string): string[] {
  const { type } = declared(specifier, name);
  return type.getProperties().map((p) => p.name);
}

/**
 * The `type` literal of each kind of element of the list field `field` of the exported interface `name` (a field
 * that may be absent or null: its list's element type), beside the module `specifier`.
 */
export function elementTags(specifier: string, name: string, field: string): string[] {
  const { checker, type, where } = declared(specifier, name);
  const property = type.getProperty(field);
  if (!property) throw new Error(`no field ${field} of ${where}`);
  const list = checker.getNonNullableType(checker.getTypeOfSymbol(property));
  const element = checker.isArrayType(list) ? checker.getTypeArguments(list as ts.TypeReference)[0] : undefined;
  if (!element) throw new Error(`${field} of ${where} is not a list`);
  return tagsOf(checker, element, `${field} of ${where}`);
}
