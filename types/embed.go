// Package types embeds the editor type declarations of the 'stackbone'
// module (stackbone/index.d.ts and stackbone/globals.d.ts), so the binary
// can write them into a new project (`stackbone init`) without the
// repository. The files in this folder are the only copy.
package types

import "embed"

// Stackbone holds stackbone/index.d.ts and stackbone/globals.d.ts.
//
//go:embed stackbone/index.d.ts stackbone/globals.d.ts
var Stackbone embed.FS
