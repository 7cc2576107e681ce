package replay

import _ "embed"

// CSS is the stylesheet of the HTML report, shared with the audit console
// (package console) so that a report and the page that made it look alike.
//
//go:embed report.css
var CSS string
