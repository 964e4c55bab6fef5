export * from './file-tool.js';
export * from './transcript.js';
export * from './tokens.js';
export * from './scripted-model.js';
export * from './harness.js';
export * from './world.js';
export * from './session.js';
