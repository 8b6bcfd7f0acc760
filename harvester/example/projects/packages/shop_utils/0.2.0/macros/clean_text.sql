{#- Trimmed, lower-case text; an empty string becomes NULL. -#}
{% macro clean_text(column_name) -%}
    nullif(lower(trim({{ column_name }})), '')
{%- endmacro %}
