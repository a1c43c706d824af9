package schema

import "golang.org/x/text/message"

var printer = message.NewPrinter(message.MatchLanguage("en"))
