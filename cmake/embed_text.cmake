# cmake -DINPUT=<file> -DOUTPUT=<file.cpp> -DFUNCTION=<name> -DNAMESPACE=<ns> -P embed_text.cmake
# Writes a C++ source defining `std::string_view <NAMESPACE>::<FUNCTION>()`, which returns the
# bytes of INPUT, as a raw string literal. Run at build time (add_custom_command), so the source
# is regenerated whenever INPUT changes. Fails if INPUT holds the literal's closing delimiter.
file(READ "${INPUT}" text)
set(delimiter "ddp_embed")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains ')${delimiter}\"', which would end the raw string literal early; "
                      "change the delimiter in ${CMAKE_CURRENT_LIST_FILE}")
endif()
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by cmake/embed_text.cmake; do not edit.\n"
  "#include <string_view>\n\nnamespace ${NAMESPACE} {\n\nstd::string_view ${FUNCTION}() {\n"
  "  static constexpr std::string_view kText = R\"${delimiter}(${text})${delimiter}\";\n"
  "  return kText;\n}\n\n}  // namespace ${NAMESPACE}\n")
