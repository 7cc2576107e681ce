// Package text implements ONNX's string and n-gram operators:
// StringNormalizer and TfIdfVectorizer.
//
// Case mapping uses Go's Unicode case tables (strings.ToLower and
// strings.ToUpper), which is how vouch reads every locale: the result does
// not depend on the machine's locale settings, so the locale attribute is
// accepted and treated as en_US.
package text

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{
		"StringNormalizer": {Run: runStringNormalizer, Infer: inferStringNormalizer},
		"TfIdfVectorizer":  {Run: runTfIdf, Infer: inferTfIdf},
	}
}
