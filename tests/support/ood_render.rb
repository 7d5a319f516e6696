# Renders one of an Open OnDemand app's ERB files as the portal does, for the tests:
#   ruby tests/support/ood_render.rb FILE.erb VALUES.json
# VALUES (a JSON object) are the form's values (or, for view.html.erb, the connection file's):
# each is a local name in the template (`num_cores`), and `context.<name>` too, as in the files
# under template/. ERB's trim mode "-" (`<%-` and `-%>`), as Open OnDemand uses.
require "erb"
require "json"
require "ostruct"

# The names a template sees.
class Scope
  attr_reader :context

  def initialize(values)
    @values = values
    @context = OpenStruct.new(values)
  end

  def method_missing(name, *args)
    key = name.to_s
    return @values[key] if args.empty? && @values.key?(key)

    super
  end

  def respond_to_missing?(name, include_private = false)
    @values.key?(name.to_s) || super
  end

  def scope_binding
    binding
  end
end

abort "usage: ruby #{$PROGRAM_NAME} FILE.erb VALUES.json" unless ARGV.size == 2
values = JSON.parse(File.read(ARGV[1]))
print ERB.new(File.read(ARGV[0]), trim_mode: "-").result(Scope.new(values).scope_binding)
