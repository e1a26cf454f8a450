# Writes a C++ file that defines `const char SYMBOL[]` (namespace spotps) as
# the text of INPUT, so that a page can live in a file of its own and still
# ship inside the binary:
#
#   cmake -DINPUT=page.html -DOUTPUT=page_html.cc -DSYMBOL=kPageHtml -P EmbedText.cmake
#
# The text goes in a raw string literal; one that contains the literal's
# closing delimiter is refused.
file(READ "${INPUT}" text)
string(FIND "${text}" ")embedded_text\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains )embedded_text\", which would end the literal")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/EmbedText.cmake: edit that file.\n"
  "namespace spotps {\n"
  "extern const char ${SYMBOL}[];\n"
  "const char ${SYMBOL}[] = R\"embedded_text(${text})embedded_text\";\n"
  "}  // namespace spotps\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
