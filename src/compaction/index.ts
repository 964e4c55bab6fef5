export * from './model.js';
export * from './should-compact.js';
export * from './tool.js';
export * from './resume-context.js';
export * from './compact.js';
