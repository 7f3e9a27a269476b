# Installation layout and the Debian package (`cpack -G DEB` in the build directory, or
# packaging/make-deb.sh). Installed, the binaries find their data beside them:
#   bin/ragraph, bin/ragraph-workbench
#   share/ragraph/datasets/models/<model>/   the shipped models (core/fs.cpp: findShippedDir)
#   share/ragraph/workflows/*.json           the built-in workflows as editable files
#   share/applications, share/metainfo, share/icons/hicolor/scalable/apps, share/man/man1
# The corpus is built on first use into the user's XDG data directory (`ragraph corpus build`).
include(GNUInstallDirs)

set(_ragwb_share ${CMAKE_INSTALL_DATADIR}/ragraph)
foreach(_model rag-llama rag-llama-roles rag-llama-roles-wide rag-llama-dep rag-llama-block rag-llama-vanilla rag-embedder rag-embedder-lex)
  install(FILES
    ${PROJECT_SOURCE_DIR}/datasets/models/${_model}/config.json
    ${PROJECT_SOURCE_DIR}/datasets/models/${_model}/model.safetensors
    ${PROJECT_SOURCE_DIR}/datasets/models/${_model}/tokenizer.json
    ${PROJECT_SOURCE_DIR}/datasets/models/${_model}/PROVENANCE.md
    DESTINATION ${_ragwb_share}/datasets/models/${_model})
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/workflows/ DESTINATION ${_ragwb_share}/workflows
        FILES_MATCHING PATTERN "*.json")
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Man pages generated from the binaries' own help text at build time.
set(_ragwb_man_dir ${CMAKE_BINARY_DIR}/man)
set(_ragwb_pages ragraph)
if(RAGWB_GUI)
  list(APPEND _ragwb_pages ragraph-workbench)
endif()
set(_ragwb_man_files "")
foreach(_page ${_ragwb_pages})
  add_custom_command(OUTPUT ${_ragwb_man_dir}/${_page}.1.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_ragwb_man_dir}
    COMMAND ${CMAKE_COMMAND} -E env VERSION=${PROJECT_VERSION}
            ${PROJECT_SOURCE_DIR}/packaging/make-man.sh ${_page} $<TARGET_FILE:${_page}> ${_ragwb_man_dir}/${_page}.1
    COMMAND gzip -9nf ${_ragwb_man_dir}/${_page}.1
    DEPENDS ${_page} ${PROJECT_SOURCE_DIR}/packaging/make-man.sh
    COMMENT "Generating the ${_page}(1) man page from its help text"
    VERBATIM)
  list(APPEND _ragwb_man_files ${_ragwb_man_dir}/${_page}.1.gz)
endforeach()
add_custom_target(man_pages ALL DEPENDS ${_ragwb_man_files})
install(FILES ${_ragwb_man_files} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

if(RAGWB_GUI)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/io.github.ragraph.Workbench.desktop
          DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/io.github.ragraph.Workbench.metainfo.xml
          DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/ragraph-workbench.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
endif()

# ---- CPack: ragraph-workbench_<version>_<arch>.deb ------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ragraph-workbench)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "RAGraph Workbench developers")
set(CPACK_PACKAGE_CONTACT "RAGraph Workbench developers <ragraph-workbench@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "workbench for designing, serving and understanding RAG workflows")
# The summary is the Description's first line; this is the rest (lines start with a space).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
" A Qt 6 desktop workbench with a retrieval-augmented generation serving engine
 inside: a visual RAGraph workflow editor, live CPU/GPU pipeline timelines,
 cache heatmaps and a KV-tree inspector; and the ragraph command line for
 corpora, training, evaluation, benchmarks and an OpenAI-compatible server.
 Ships small trained models; builds its corpus from WordNet and FOLDOC.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# Library dependencies from the binaries themselves (dpkg-shlibdeps); the corpus sources by name.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "wordnet-base, dict-foldoc")
set(CPACK_STRIP_FILES ON)
# The models (38 MB of F32 weights) hardly compress: gzip is as small as xz here and 5x faster.
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_BINARY_DIR}/package)
include(CPack)
