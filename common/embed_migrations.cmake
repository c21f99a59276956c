# Writes a C file holding every schema/NNN_*.sql as {name, text}; run by the
# build, never by hand. Bytes are emitted as an array initialiser because
# -Wpedantic rejects string literals longer than 4095 characters.
set(_body "/* generated from schema/ by common/embed_migrations.cmake */\n")
string(APPEND _body "#include \"rl/migrations.h\"\n\n")
set(_table "")
set(_n 0)
foreach(_f IN LISTS FILES)
    get_filename_component(_name ${_f} NAME)
    file(READ ${_f} _hex HEX)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _arr "${_hex}")
    string(APPEND _body "static const char m${_n}[] = {${_arr}0x00};\n")
    string(APPEND _table "    {\"${_name}\", m${_n}},\n")
    math(EXPR _n "${_n} + 1")
endforeach()
string(APPEND _body "\nconst struct rl_migration rl_migrations[] = {\n${_table}")
string(APPEND _body "    {0, 0}\n};\n\nconst size_t rl_migrations_count = ${_n};\n")
file(WRITE ${OUT}.tmp "${_body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
